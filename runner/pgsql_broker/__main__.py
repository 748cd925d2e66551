"""python -m pgsql_broker"""
from .cli import main

main()

"""Tasks in Python: a worker that claims tasks by name (broker.broker_claim_tasks), runs each with its handler and
ends it in the transaction where the handler wrote (docs/tasks.md).

    from pgsql_broker.tasks import Worker

    worker = Worker()

    @worker.task("send_email", concurrency=4)
    async def send_email(args, ctx):
        await ctx.conn.execute("INSERT INTO mail_log (address) VALUES (%s)", [args["to"]])
        return {"sent": True}

Run it with `pgsql-broker worker --app myapp.tasks:worker`, or `await worker.run()`.
"""
from .context import Task, TaskContext
from .worker import Worker

__all__ = ["Task", "TaskContext", "Worker"]

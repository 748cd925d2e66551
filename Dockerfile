# pgsql_broker runner image: the Python package built as a wheel, installed on a slim
# Python base, run as a non-root user. No configuration or secret is baked in: mount the
# config at /etc/pgsql-broker/broker.yaml.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md pgsql_broker.control ./
COPY extension/ extension/
COPY sql/roles.sql sql/roles.sql
COPY runner/ runner/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ARG VERSION=0.3.0
LABEL org.opencontainers.image.title="pgsql-broker" \
      org.opencontainers.image.description="PostgreSQL job broker runner" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels "pgsql-broker==${VERSION}" \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin broker
USER 10001
EXPOSE 9469
# asks the runner itself: 200 while every database is served (active or standby)
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9469/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["pgsql-broker"]
CMD ["start", "--config", "/etc/pgsql-broker/broker.yaml"]

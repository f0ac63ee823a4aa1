# The scheduler image: `batchsched run` as a non-root user, with exactly the
# dependencies in requirements.lock. Build from the repository root:
#   docker build -t batchsched:0.1.0 .
# and set that name in manifests/deployment.yaml.
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/batchsched
COPY requirements.lock /tmp/requirements.lock
# --no-deps: the lock is complete, nothing unpinned may slip in.
RUN /opt/batchsched/bin/pip install --no-deps -r /tmp/requirements.lock
WORKDIR /src
COPY pyproject.toml README.md ./
COPY batchsched ./batchsched
RUN /opt/batchsched/bin/pip install --no-deps . \
 && /opt/batchsched/bin/python -m compileall -q /opt/batchsched

FROM python:3.11.11-slim-bookworm
COPY --from=build /opt/batchsched /opt/batchsched
ENV PATH=/opt/batchsched/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["batchsched"]
CMD ["run", "--leader-elect"]

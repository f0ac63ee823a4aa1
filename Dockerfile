# The scheduler image: `batchsched run` as a non-root user, with exactly the
# dependencies in requirements.lock, each file checked against its hash there.
# Build from the repository root:
#   docker build -t batchsched:0.1.0 .
# and give that name to the chart (--set image.repository=..., image.tag=...). Both
# stages use one base image, so
# the interpreter the packages were installed for is the one that runs them.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/batchsched
COPY requirements.lock /tmp/requirements.lock
# --require-hashes: a file that differs from the one locked is refused; --no-deps: the
# lock is complete, nothing unpinned may slip in.
RUN /opt/batchsched/bin/pip install --require-hashes --no-deps -r /tmp/requirements.lock
WORKDIR /src
COPY pyproject.toml README.md ./
COPY batchsched ./batchsched
# Built with the locked setuptools, fetching nothing.
RUN /opt/batchsched/bin/pip install --no-deps --no-build-isolation --no-index . \
 && /opt/batchsched/bin/python -m compileall -q /opt/batchsched

FROM ${PYTHON_IMAGE}
COPY --from=build /opt/batchsched /opt/batchsched
ENV PATH=/opt/batchsched/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["batchsched"]
CMD ["run", "--leader-elect"]

# llm-doctor for scheduled checks (deploy/kubernetes/cronjob.yaml): the package installed from this
# source tree into a slim Python image, run as an unprivileged user.
# Build: docker build -t llm-doctor .   Run: docker run --rm llm-doctor diagnose --engine http://vllm:8000
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY doctor ./doctor
COPY checks ./checks
COPY reports ./reports
RUN pip install --no-compile . && rm -rf /src

# A fixed numeric uid, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
RUN useradd --uid 10001 --create-home --home-dir /home/llm-doctor llm-doctor
USER 10001:10001
WORKDIR /home/llm-doctor

ENTRYPOINT ["llm-doctor"]
CMD ["--help"]

# One image for every strata role; the command picks the role.
FROM python:3.11-slim
WORKDIR /opt/strata
COPY pyproject.toml README.md ./
COPY common ./common
COPY services ./services
RUN pip install --no-cache-dir .
ENTRYPOINT ["strata"]
CMD ["--help"]

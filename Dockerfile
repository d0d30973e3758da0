# The Sluice image: one static binary with the editor bundle embedded.
#
#   docker build -t sluice:latest --build-arg VERSION=$(git describe --always) .
#
# Stage 1 bundles the editor (esbuild, into static/dist), stage 2 compiles the binary that
# embeds it, stage 3 is a small image with the binary alone, running as an unprivileged
# user. The image's entrypoint is the binary: give it the command as arguments
# (`serve ...`, `worker ...`), as the manifests of `sluice deploy kubernetes` do.
# Not built in this repository's CI (no Docker engine there); see docs/deploy.md.

FROM node:20-bookworm-slim AS ui
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY ui ui
COPY static static
RUN npm run build

FROM golang:1.26-bookworm AS go
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=ui /src/static/dist static/dist
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice ./cmd/sluice

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=go /out/sluice /usr/local/bin/sluice
USER 65532:65532
# Without SLUICE_TOKEN, serve makes a token on its first start and keeps it here (mount
# a volume on /home/nonroot/.sluice to keep it across containers); `docker exec
# CONTAINER sluice token` prints it. With SLUICE_TOKEN set, that one is used.
ENV SLUICE_TOKEN_FILE=/home/nonroot/.sluice/token
# serve's --addr in the manifests, and the workers' --metrics-addr.
EXPOSE 8080 9090
# The image has no shell or curl: the binary probes itself. A worker's container probes
# its --metrics-addr instead (SLUICE_HEALTH_ADDR=127.0.0.1:9090).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 CMD ["/usr/local/bin/sluice", "health"]
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve", "--addr", ":8080"]

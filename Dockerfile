# A small static image of the `karpenter` binary (rustls, no system TLS library).
#
#   docker build -t karpenter-rs:dev .
#   docker run --rm karpenter-rs:dev --help
#
# Only the operator crate is built, with the `aws` feature so the image runs either
# provider (`CLOUD_PROVIDER=fake` or `aws`).
ARG RUST_VERSION=1.90

FROM rust:${RUST_VERSION}-bookworm AS build
ARG TARGETARCH=amd64
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/*
RUN case "${TARGETARCH}" in \
      amd64) echo x86_64-unknown-linux-musl > /target ;; \
      arm64) echo aarch64-unknown-linux-musl > /target ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}" >&2; exit 1 ;; \
    esac \
    && rustup target add "$(cat /target)"
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p karpenter-operator --features aws --bin karpenter --target "$(cat /target)" \
    && cp "target/$(cat /target)/release/karpenter" /karpenter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /karpenter /karpenter
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/karpenter"]
CMD ["controller"]

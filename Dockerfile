# syntax=docker/dockerfile:1
# Build stage: the Go toolchain compiles static binaries.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# the dlock module, which go.mod replaces with ./dlock
COPY dlock/go.mod dlock/go.sum ./dlock/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/orderd ./cmd/loadtest ./cmd/lockdemo

# Run stage: no shell, no package manager, not root.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/orderd"]

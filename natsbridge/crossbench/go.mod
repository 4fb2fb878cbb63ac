// crossbench is natsbridge's benchmark harness: a module of its own, so
// that the natsbridge module's zip does not carry it. Not a library, never
// tagged: it builds against this repository's working tree.
module github.com/heraldgo/herald/natsbridge/crossbench

go 1.26.0

require (
	github.com/heraldgo/herald v0.1.0
	github.com/heraldgo/herald/natsbridge v0.1.0
	github.com/nats-io/nats.go v1.56.0
)

require (
	github.com/antithesishq/antithesis-sdk-go v0.9.0-default-no-op // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.3 // indirect
	github.com/nats-io/nats-server/v2 v2.15.3 // indirect
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace (
	github.com/heraldgo/herald => ../..
	github.com/heraldgo/herald/natsbridge => ..
)

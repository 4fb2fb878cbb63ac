module github.com/heraldgo/herald

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/hashicorp/golang-lru/v2 v2.0.7
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
)

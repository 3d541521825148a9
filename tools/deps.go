//go:build tools

// Package tools pins the project's dependencies while packages that use them
// are being written, so go.mod stays stable across parallel work.
package tools

import (
	_ "github.com/cenkalti/backoff/v5"
	_ "github.com/fxamacker/cbor/v2"
	_ "github.com/getkin/kin-openapi/openapi3"
	_ "github.com/go-playground/validator/v10"
	_ "github.com/gofiber/fiber/v2"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/slack-go/slack"
	_ "github.com/sony/gobreaker/v2"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/bbolt"
	_ "go.yaml.in/yaml/v3"
)

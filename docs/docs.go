// Package docs holds the documents that code needs: the OpenAPI description of the HTTP API,
// which the service serves at GET /api/openapi.yaml and its API tests validate against.
package docs

import _ "embed"

// OpenAPI is openapi.yaml, the OpenAPI 3 description of the HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte

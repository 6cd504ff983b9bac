package api

import "time"

// What the external tests (package api_test, which builds real stacks through internal/app
// and so cannot be package api) need of the package's unexported names.
const (
	CodeInvalidArgument      = codeInvalidArgument
	CodeUnauthenticated      = codeUnauthenticated
	CodeForbidden            = codeForbidden
	CodeSaleNotActive        = codeSaleNotActive
	CodeNotFound             = codeNotFound
	CodeMethodNotAllowed     = codeMethodNotAllowed
	CodeAlreadyOrdered       = codeAlreadyOrdered
	CodeInProgress           = codeInProgress
	CodeSoldOut              = codeSoldOut
	CodeTooLarge             = codeTooLarge
	CodeUnsupportedMediaType = codeUnsupportedMediaType
	CodeUnavailable          = codeUnavailable
	CodeOverloaded           = codeOverloaded
	CodeInternal             = codeInternal
)

type (
	ErrorBody       = errorBody
	VoucherResponse = voucherResponse
)

// ReadyStaleAfter is the age past which /readyz no longer trusts a result.
const ReadyStaleAfter = readyStaleAfter

// SetClock makes r read the time from now: when a round of checks ran, and how old it is.
func (r *Readiness) SetClock(now func() time.Time) { r.now = now }

// BearerToken is the token of an Authorization value with the Bearer scheme in any case.
var BearerToken = bearerToken

package async_test

import "errors"

var errorsIsStd = errors.Is

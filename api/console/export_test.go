package console

// ExecutionOf is executionOf, for the tests.
var ExecutionOf = executionOf

package console

// ExecutionOf is executionOf, for the tests.
var ExecutionOf = executionOf

// SafeReturnForTest exposes safeReturn to the external tests.
var SafeReturnForTest = safeReturn

// AuditOf is auditOf, for the tests.
var AuditOf = auditOf

// AuditOfEntry is auditOfEntry, for the tests.
var AuditOfEntry = auditOfEntry

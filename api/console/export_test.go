package console

// SafeReturnForTest exposes safeReturn to the external tests.
var SafeReturnForTest = safeReturn

package console

// ParseHolder is parseHolder, for the tests.
var ParseHolder = parseHolder

package metrics

// MaxOperationNames is maxOperationNames, for package metrics_test.
const MaxOperationNames = maxOperationNames

"""The versioned output ABI (`readout-abi/1`) and build-manifest schemas, shipped as package data."""

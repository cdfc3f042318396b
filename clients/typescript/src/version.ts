// The version of the HTTP API this client speaks: api/openapi.yaml's info.version. The package
// version is 0.<API_VERSION>.<patch> while the server publishes no releases (see README.md,
// "Versions"); a test checks both against the repository.

/** The HTTP API version this client speaks (api/openapi.yaml's info.version). */
export const API_VERSION = '1';

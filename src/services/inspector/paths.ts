/** The inspector's base path on the management plane (spec document 3, "Endpoints"). */
export const INSPECTOR_BASE = "/api/tools/traffic-inspector"
/** Where clients fetch the local CA certificate to trust. */
export const INSPECTOR_CA_PATH = `${INSPECTOR_BASE}/ca.pem`
/** The live feed's WebSocket path. */
export const INSPECTOR_WS_PATH = `${INSPECTOR_BASE}/ws`

/** The inspector's base path on the management plane (spec document 3, "Endpoints"). */
export const INSPECTOR_BASE = "/api/tools/traffic-inspector"
/** Where clients fetch the local CA certificate to trust. */
export const INSPECTOR_CA_PATH = `${INSPECTOR_BASE}/ca.pem`
/** The live feed's WebSocket path. */
export const INSPECTOR_WS_PATH = `${INSPECTOR_BASE}/ws`
/** The transparent-capture (TPROXY) mode's route, under the agent-bridge prefix (spec document 3). */
export const TPROXY_PATH = "/api/tools/agent-bridge/tproxy"

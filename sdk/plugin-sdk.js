// The gateway's plugin SDK (docs/plugins.md). Inside the gateway a plugin imports this module as
// `gateway/plugin-sdk`; the same file is the package's public entry, so a plugin's own tests can
// import it too. It has no imports and touches nothing but its arguments: it runs in the plugin's
// sandbox as it is. A hook returns one helper's result, an array of them, or nothing.

const KEBAB = /^[a-z0-9]+(-[a-z0-9]+)*$/

/**
 * Checks a plugin's definition and fills the defaults: priority 100, enabled true. The name must
 * be kebab-case. A plugin's entry file default-exports what this returns.
 */
export const definePlugin = (definition) => {
  if (definition === null || typeof definition !== "object") throw new TypeError("definePlugin takes an object")
  if (typeof definition.name !== "string" || !KEBAB.test(definition.name)) throw new TypeError("definePlugin: name must be kebab-case, e.g. my-plugin")
  const priority = definition.priority === undefined ? 100 : definition.priority
  if (typeof priority !== "number" || !Number.isFinite(priority)) throw new TypeError("definePlugin: priority must be a number")
  for (const [key, value] of Object.entries(definition))
    if (key.startsWith("on") && typeof value !== "function") throw new TypeError(`definePlugin: ${key} must be a function`)
  return Object.freeze({ ...definition, priority, enabled: definition.enabled !== false })
}

/** Ends the request with this answer (`{ status, body, headers }`); without one, 403 in the client's own error format. */
export const blockRequest = (response) => ({ __gateway: "block", response: response === undefined ? null : response })

/** Replaces the request body (onRequest, onModelSelect); later plugins see the new one. */
export const modifyBody = (body) => ({ __gateway: "modify", body })

/** Merges into the request's metadata, which later hooks and plugins read as `ctx.metadata`. */
export const addMetadata = (metadata) => ({ __gateway: "metadata", metadata })

/** Adds these headers to the answer the client gets, however it ends (onRequest, onModelSelect). */
export const addResponseHeaders = (headers) => ({ __gateway: "headers", headers })

/** The plugin's configuration (plugin.json `configSchema`, with defaults filled); `{}` outside the gateway. */
export const config = Object.freeze({ ...(globalThis.__pluginConfig ?? {}) })

// A setup file (vitest.config.ts): the modules the gateway loads lazily for MCP, loaded before a
// worker's first test file, through the gateway's own loaders.
//
// Inside vitest a module is fetched from vitest's main process over an RPC that fails after a
// fixed 60 s, and a fetch that failed stays failed for the rest of the worker's life (its module
// cache keeps the rejected import: vitejs/vite#23131). A gateway that loads the MCP client in the
// middle of a busy run met that once in a fresh clone's first `npm test`: every later MCP test in
// that worker read "the MCP client could not be loaded: [vitest-worker]: Timeout calling fetch".
// Loaded here, before the worker's first file, the later imports are answered from the worker's
// own cache. Outside vitest (node running dist/) none of this applies: there the loaders import
// from disk when the first MCP server or session needs them.
import { loadSdk as loadManagementSdk } from "../../src/management/mcp/httpSessions.js"
import { loadTransport } from "../../src/inference/mcp/sessions.js"
import { loadOAuthClient } from "../../src/services/mcp/oauthProvider.js"
import { loadConnection } from "../../src/services/mcp/supervisor.js"

await Promise.all([
  loadConnection(),
  loadOAuthClient(),
  loadManagementSdk(),
  loadTransport(),
  import("@modelcontextprotocol/sdk/server/index.js"),
  import("@modelcontextprotocol/sdk/types.js")
])

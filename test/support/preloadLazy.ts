// A setup file (vitest.config.ts): the modules the gateway loads lazily for MCP, loaded through the
// gateway's own loaders before every test file. The first file of each worker loads them, at its
// start; for the later files the calls are answered from the worker's module cache (or load them
// again after a file reset the modules).
//
// Inside vitest a module is fetched from vitest's main process over an RPC that fails after a
// fixed 60 s, and vite-node's module cache in the worker keeps an import that failed for the rest
// of the worker's life (the failure vitejs/vite#23131 describes for vite's own module runner). A
// gateway that loaded its MCP client in the middle of a busy run met that in a fresh clone's
// first `npm test`: every later MCP test in that worker read "the MCP client could not be loaded:
// [vitest-worker]: Timeout calling fetch". Outside vitest (node running dist/) none of this
// applies: there the loaders import from disk when the first MCP server or session needs them.
//
// Settled whatever happens: should a load fail here too, it is the MCP tests that say so, as
// before, not every file of the worker.
import { loadSdk as loadGatewaySdk } from "../../src/inference/mcp/McpGateway.js"
import { loadTransport } from "../../src/inference/mcp/sessions.js"
import { loadSdk as loadManagementSdk } from "../../src/management/mcp/httpSessions.js"
import { loadOAuthClient } from "../../src/services/mcp/oauthProvider.js"
import { loadConnection } from "../../src/services/mcp/supervisor.js"

await Promise.allSettled([loadConnection(), loadOAuthClient(), loadManagementSdk(), loadTransport(), loadGatewaySdk()])

import type { Target, ToolModule } from "../tool.js"
import { claude } from "./claude.js"
import { codex } from "./codex.js"
import { gemini } from "./gemini.js"
import { kilo, opencode } from "./opencode.js"
import { qwen } from "./qwen.js"

/** The tools whose configuration setup writes (catalog `configType: custom`), by catalog id. */
export const TOOL_MODULES: Readonly<Record<string, ToolModule>> = { codex, claude, gemini, opencode, qwen, kilo }

/**
 * The steps for tools configured in their own interface (`guide`) or not at all (`mitm`),
 * with this gateway's address, key (masked by the caller when shown) and model filled in.
 */
export const GUIDES: Readonly<Record<string, (t: Target) => ReadonlyArray<string>>> = {
  cline: (t) => [
    "In VS Code open Cline's settings (the gear in the Cline panel).",
    "API Provider: OpenAI Compatible.",
    `Base URL: ${t.baseUrl}/v1`,
    `API Key: ${t.apiKey}`,
    `Model ID: ${t.model}`
  ],
  continue: (t) => [
    "Add a model to ~/.continue/config.yaml:",
    "models:",
    `  - name: ${t.model} (gateway)`,
    "    provider: openai",
    `    model: ${t.model}`,
    `    apiBase: ${t.baseUrl}/v1`,
    `    apiKey: ${t.apiKey}`,
    "    roles: [chat, edit, apply]"
  ],
  cursor: (t) => [
    "Cursor Settings → Models → API Keys → OpenAI API Key:",
    `  key ${t.apiKey}, and 'Override OpenAI Base URL' = ${t.baseUrl}/v1`,
    `Add the custom model name ${t.model} and select it in chat.`,
    "Only chat requests with that model reach the gateway: tab completion, apply and background agents stay on Cursor's own servers."
  ],
  copilot: () => [
    "GitHub Copilot CLI talks only to GitHub's endpoints and has no base URL setting.",
    "It can reach the gateway only through an intercepting (MITM) proxy, which this gateway does not provide."
  ]
}

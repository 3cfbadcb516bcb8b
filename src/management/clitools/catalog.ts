import type { CliToolEntry } from "../../domain/clitools.js"

/**
 * The coding-tool catalog, its fields and CLI_COMPAT_ALL's effect on it: docs/coding-tools.md#the-catalog.
 * Static data only: the CLI's command list imports it at start (docs/cli.md#start-up-lazy-commands).
 */
export const CLI_TOOLS: ReadonlyArray<CliToolEntry> = [
  {
    id: "codex",
    name: "Codex",
    color: "#10a37f",
    description: "OpenAI's coding agent for the terminal; speaks the Responses API.",
    docsUrl: "https://developers.openai.com/codex/config-reference",
    vendor: "OpenAI",
    category: "code",
    acpSpawnable: true,
    baseUrlSupport: "full",
    configType: "custom",
    command: "codex"
  },
  {
    id: "claude",
    name: "Claude Code",
    color: "#d97757",
    description: "Anthropic's coding agent for the terminal; speaks the Messages API.",
    docsUrl: "https://docs.anthropic.com/en/docs/claude-code/settings",
    vendor: "Anthropic",
    category: "code",
    acpSpawnable: true,
    baseUrlSupport: "full",
    configType: "custom",
    command: "claude"
  },
  {
    id: "gemini",
    name: "Gemini CLI",
    color: "#4285f4",
    description: "Google's coding agent for the terminal; speaks the generative-language API.",
    docsUrl: "https://github.com/google-gemini/gemini-cli/blob/main/docs/get-started/configuration.md",
    vendor: "Google",
    category: "code",
    acpSpawnable: true,
    baseUrlSupport: "full",
    configType: "custom",
    command: "gemini"
  },
  {
    id: "opencode",
    name: "opencode",
    color: "#f5a623",
    description: "Open-source coding agent for the terminal; any OpenAI-compatible provider.",
    docsUrl: "https://opencode.ai/docs/config/",
    vendor: "SST",
    category: "code",
    acpSpawnable: true,
    baseUrlSupport: "full",
    configType: "custom",
    command: "opencode"
  },
  {
    id: "qwen",
    name: "Qwen Code",
    color: "#615ced",
    description: "Qwen's coding agent for the terminal (a Gemini CLI fork); speaks chat completions.",
    docsUrl: "https://qwenlm.github.io/qwen-code-docs/en/users/configuration/settings/",
    vendor: "Alibaba",
    category: "code",
    acpSpawnable: true,
    baseUrlSupport: "full",
    configType: "custom",
    command: "qwen"
  },
  {
    id: "kilo",
    name: "Kilo",
    color: "#f8f675",
    description: "Kilo Code's agent for the terminal (an opencode fork); any OpenAI-compatible provider.",
    docsUrl: "https://kilo.ai/docs/cli",
    vendor: "Kilo Code",
    category: "code",
    acpSpawnable: true,
    baseUrlSupport: "full",
    configType: "custom",
    command: "kilo"
  },
  {
    id: "cline",
    name: "Cline",
    color: "#5a67d8",
    description: "Coding agent for VS Code; an 'OpenAI Compatible' provider in its settings panel.",
    docsUrl: "https://docs.cline.bot/provider-config/openai-compatible",
    vendor: "Cline",
    category: "code",
    acpSpawnable: false,
    baseUrlSupport: "full",
    configType: "guide",
    command: "cline"
  },
  {
    id: "continue",
    name: "Continue",
    color: "#1f2937",
    description: "IDE assistant (VS Code, JetBrains); models with provider 'openai' and an apiBase in config.yaml.",
    docsUrl: "https://docs.continue.dev/customize/model-providers/top-level/openai",
    vendor: "Continue",
    category: "code",
    acpSpawnable: false,
    baseUrlSupport: "full",
    configType: "guide",
    command: "cn"
  },
  {
    id: "cursor",
    name: "Cursor",
    color: "#000000",
    description: "AI editor; its 'Override OpenAI Base URL' reaches chat models only (tab completion and agents stay on Cursor's servers).",
    docsUrl: "https://docs.cursor.com/settings/api-keys",
    vendor: "Anysphere",
    category: "code",
    acpSpawnable: false,
    baseUrlSupport: "partial",
    configType: "guide",
    command: "cursor"
  },
  {
    id: "copilot",
    name: "GitHub Copilot CLI",
    color: "#24292f",
    description: "GitHub's coding agent; talks only to GitHub's endpoints (no base URL to change).",
    docsUrl: "https://docs.github.com/en/copilot/how-tos/use-copilot-agents/use-copilot-cli",
    vendor: "GitHub",
    category: "agent",
    acpSpawnable: false,
    baseUrlSupport: "none",
    configType: "mitm",
    command: "copilot"
  }
]

export const findTool = (id: string): CliToolEntry | undefined => CLI_TOOLS.find((t) => t.id === id)

/** Whether a tool is listed, set up and launched: `full` ones always, the others with CLI_COMPAT_ALL. */
export const toolEnabled = (tool: CliToolEntry, compatAll: boolean): boolean => compatAll || tool.baseUrlSupport === "full"

/** Why a known tool is not available now (undefined: it is). */
export const toolUnavailable = (tool: CliToolEntry, compatAll: boolean): string | undefined =>
  toolEnabled(tool, compatAll)
    ? undefined
    : `${tool.name} (${tool.id}) has ${tool.baseUrlSupport} base-URL support and is only listed with the feature flag CLI_COMPAT_ALL on`

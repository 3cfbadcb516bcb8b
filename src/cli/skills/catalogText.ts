import type { SkillId } from "../../services/skills/SkillCatalog.js"

/**
 * The prose of each skill: its title, its front-matter description (when an agent should use
 * it) and its overview. Everything else in a skill file (authentication, endpoints, commands) is
 * generated from the gateway's own definitions (generate.ts). `docs` names the page that explains
 * the area; `api` (CLI skills) the REST skill of the same area.
 */
export interface SkillText {
  readonly title: string
  readonly description: string
  readonly overview: string
  readonly docs?: string
  readonly api?: SkillId
}

export const SKILL_TEXT: Record<SkillId, SkillText> = {
  "gw-auth": {
    title: "Login and sessions (REST)",
    description: "Log in to the gateway's management API, read the session, log out, and turn the login requirement on or off.",
    overview:
      "The management API takes an admin API key as a Bearer token, or the cookie session that `POST /api/auth/login` opens with the admin password. `GET /api/init` tells a first-run client whether a password or keys exist yet.",
    docs: "docs/auth.md"
  },
  "gw-providers": {
    title: "Provider connections (REST)",
    description:
      "Add, test, update and remove the upstream provider connections of the gateway, including custom provider nodes and OAuth sign-in.",
    overview:
      "A connection is a provider of the catalog (or a custom node) with its key or OAuth grant, base URL and options; keys are stored encrypted and always shown masked. Tests probe the upstream with the stored credentials.",
    docs: "docs/providers.md"
  },
  "gw-models": {
    title: "Models, aliases, pricing, evals and the playground (REST)",
    description:
      "Read the model catalog of the connected providers, manage aliases, custom models and prices, run evals against models, check which clients each model works with, and keep playground presets or improve a prompt.",
    overview:
      "Models are addressed as `<provider or connection>/<model>`, by an alias, a combo name or an `auto/...` id. The catalog lists what each connection serves; custom models add ids a provider does not list; prices drive the cost of every request. The playground's presets and prompt improvement are under `/api/playground` (docs/playground.md). `GET /api/compat` shows what running the supported clients' recorded requests against models would cost, `POST /api/compat/run` starts a run (202; `GET /api/compat` shows its cells as they are answered) of which client works with which model (docs/compat.md).",
    docs: "docs/routing.md"
  },
  "gw-combos-routing": {
    title: "Combos and routing (REST)",
    description:
      "Create and change combos (named routes over several models with a strategy and fallback), inspect the auto router and sticky sessions, and read how a combo's shadow targets compare.",
    overview:
      "A combo is a model name clients use; the gateway resolves it to ordered targets with one of its strategies and falls back to the next target on a retryable failure. `auto/...` models pick from every connected provider; sessions pin a conversation to where it was served. A combo's `config.shadow` also sends a sample of its requests to candidate models after the answer went out; `/api/shadow/report` compares them (docs/shadow.md). `POST /api/replay` sends recorded requests (an inspector session, usage rows whose bodies were kept, JSONL) to candidate models as a job and reports them the same way (docs/replay.md).",
    docs: "docs/routing.md"
  },
  "gw-api-keys": {
    title: "Gateway API keys, people and teams (REST)",
    description:
      "Create, list, update and revoke the gateway's own API keys that clients and admins present, with scopes, expiry, rate limits and an owner; manage the users and teams that own them.",
    overview:
      "Keys carry the `inference` or `admin` scope. The secret is shown once, at creation; listings mask it. A key may expire and may have its own requests-per-minute and tokens-per-minute limits. A key belongs to a user or a team (`userId`, `teamId`); users have a role (admin, team-admin, member, viewer) and belong to teams; a single-user install's password and keys are the first admin's, `usr_admin` (docs/teams.md).",
    docs: "docs/auth.md"
  },
  "gw-usage-logs": {
    title: "Usage, logs and telemetry (REST)",
    description: "Query usage history, request logs, per-connection usage, latency telemetry, the monitoring summary and the audit log.",
    overview:
      "Every request writes one usage row (tokens, cost, status, latency, key, connection). History groups and totals them; telemetry gives p50/p95/p99 per provider; the audit log records every management change.",
    docs: "docs/accounting.md"
  },
  "gw-budget": {
    title: "Budgets and token limits (REST)",
    description: "Set and read per-key spending budgets in USD and token limits, and see how much of each is used.",
    overview:
      "A budget caps what one API key may spend per day, week or month; a token limit caps the tokens a key may use on a model or provider. Requests beyond either are refused (or sent to the emergency fallback model when that is on).",
    docs: "docs/accounting.md"
  },
  "gw-settings": {
    title: "Settings, feature flags and policies (REST)",
    description:
      "Read and change the gateway's global settings, feature flags, IP filter, system prompt, thinking budget and request policies.",
    overview:
      "Settings are one document applied live. Feature flags resolve from the database, then the environment, then their defaults. Policies are versioned documents applied on the request path.",
    docs: "docs/feature-flags.md"
  },
  "gw-proxies": {
    title: "Upstream proxies (REST)",
    description: "Register upstream HTTP, HTTPS and SOCKS5 proxies, pin their IP family, set the global proxy and test it.",
    overview:
      "Outbound calls to providers may go through a proxy: the global one of the settings or one from the registry. A proxy's `family` (`auto`, `ipv4`, `ipv6`) pins the connection to one IP family and fails closed.",
    docs: "docs/egress.md"
  },
  "gw-cache": {
    title: "Response cache (REST)",
    description: "Read the response cache and idempotency statistics, and clear the caches.",
    overview:
      "Identical requests are answered from the cache (memory and database tiers, optional similarity matching); idempotency keys make retries safe within a short window.",
    docs: "docs/accounting.md"
  },
  "gw-compression": {
    title: "Prompt compression (REST)",
    description:
      "Configure prompt compression: the compression settings, the preview of a body in any wire format, language packs and rules.",
    overview:
      "Compression sends fewer tokens for the same conversation. `x-gateway-compression` (off, default, engine:<id>, a combo) wins over routing assignments, the active profile, the auto-trigger and the panel default; the answer says which in `X-Gateway-Compression`. The settings choose the active profile, the default combo and the auto-trigger; the preview shows tokens before and after per engine.",
    docs: "docs/compression.md"
  },
  "gw-context-rtk": {
    title: "Context engines and combos (REST)",
    description:
      "Configure the context engines (caveman, rtk filters, summarize), compression combos and their assignments, memory entries and skills, and read the savings.",
    overview:
      "Engines trim and filter what a conversation carries before it goes upstream (rtk for tool output, json, whitespace, caveman for prose, summarize for long histories); compression combos order them and are assigned to routing combos and models; memory entries and skills are added to the system prompt within a token budget; analytics count tokens and cost saved per engine, combo, model and day.",
    docs: "docs/compression.md"
  },
  "gw-resilience": {
    title: "Resilience: breakers, cooldowns, lockouts (REST)",
    description:
      "Inspect and reset circuit breakers, connection cooldowns and model lockouts, tune the resilience settings and read rate-limit state.",
    overview:
      "Failures open a circuit breaker per provider, cool a connection down, or lock a model out for a while; the router skips what is not available and falls back. Rate-limit headers of the upstreams are kept per connection.",
    docs: "docs/resilience.md"
  },
  "gw-cli-tools": {
    title: "Coding-tool setup and ACP agents (REST)",
    description: "Detect installed coding tools, read and write their gateway configuration, and manage Agent Client Protocol agents.",
    overview:
      "Coding tools (Codex, Claude Code, Gemini CLI, opencode, Qwen Code, Kilo, ...) are pointed at the gateway through their own configuration files; ACP agents are detected and listed.",
    docs: "docs/agents.md"
  },
  "gw-tunnels": {
    title: "Tunnels (REST)",
    description: "Expose the gateway through a quick tunnel, a token-based tunnel or a mesh funnel, and read their status.",
    overview: "Three independent tunnel backends give the gateway a public address; each has its own status and actions.",
    docs: "docs/operations.md"
  },
  "gw-sync-cloud": {
    title: "Configuration sync (REST)",
    description: "Sync the gateway's configuration with a cloud sync server, or serve as one.",
    overview:
      "The configuration travels as one bundle sealed with a passphrase: the sync client pushes and pulls it, the cloud routes store versioned bundles per space.",
    docs: "docs/operations.md"
  },
  "gw-db-backups": {
    title: "Database backups (REST)",
    description: "List, create, restore, download and upload database backups, export everything, and schedule backups.",
    overview:
      "Backups are consistent copies of the SQLite database made online; a restore replaces the live database and every cache reloads. `exportAll` is an archive of the database and its files.",
    docs: "docs/operations.md"
  },
  "gw-webhooks": {
    title: "Webhooks (REST)",
    description: "Register signed webhooks for gateway events, update or remove them, and send a test ping.",
    overview:
      "Events (request completed or failed, provider errors and recoveries, quota exceeded, combo switched) are delivered as HMAC-signed POSTs with retries; a webhook that keeps failing is disabled.",
    docs: "docs/webhooks.md"
  },
  "gw-mcp": {
    title: "MCP server (HTTP)",
    description: "Reach the gateway's Model Context Protocol server: catalog and management tools for agents.",
    overview:
      "The MCP server offers the agent-skill catalog (`gateway_agent_skills_list`, `gateway_agent_skills_get`, `gateway_agent_skills_coverage`, scope `read:catalog`) and management tools, over stdio (`gateway --mcp`) and streamable HTTP on the gateway's port.",
    docs: "docs/skills.md"
  },
  "gw-agents-a2a": {
    title: "Agent skills catalog, A2A and plugins (HTTP)",
    description:
      "Discover what the gateway offers to agents: the agent-skill catalog over REST, the A2A JSON-RPC endpoint and its agent card; install and configure plugins.",
    overview:
      "The 42 skill files (this one included) are listed, served raw and regenerated under `/api/agent-skills`. `POST /a2a` answers A2A `message/send` (or `SendMessage`) with skill `list-capabilities`: a markdown table of every skill with its raw URL. The agent card is at `/.well-known/agent-card.json`. Plugins (sandboxed code on the request path, docs/plugins.md) are installed, enabled, configured and removed under `/api/plugins`.",
    docs: "docs/skills.md"
  },
  "gw-version-manager": {
    title: "Version, health and process control (REST)",
    description: "Read the gateway's version and uptime, and restart or shut it down gracefully.",
    overview:
      "Every answer carries `X-Gateway-Version`. A restart or shutdown finishes the requests in flight first. The management API's OpenAPI document is served at `GET /api/openapi.json` without authentication.",
    docs: "docs/operations.md"
  },
  "gw-inference": {
    title: "Inference endpoints",
    description:
      "Send chat, responses, messages, embeddings, media, search and batch requests through the gateway in the OpenAI, Anthropic, Gemini or Ollama wire format.",
    overview:
      "One base URL and one key for every provider: the gateway resolves `<provider>/<model>` (or a combo, alias or `auto/...` id), translates between wire formats, streams, falls back, and counts usage. Clients that cannot send headers use `/api/v1/editor/{key}/...` with the key in the path.",
    docs: "docs/formats.md"
  },
  "cli-serve": {
    title: "Run the gateway (CLI)",
    description: "Start the gateway server from the command line and show or change its configuration and environment.",
    overview:
      "`gateway` with no subcommand serves on port 20128. The root options come before a subcommand and apply to it too (`gateway --port 3000 status`).",
    docs: "docs/cli.md",
    api: "gw-version-manager"
  },
  "cli-health": {
    title: "Health and diagnostics (CLI)",
    description: "Check whether the gateway works: doctor, status, health and logs from the command line.",
    overview:
      "`doctor` checks the installation on this machine (and, unless `--no-liveness`, whether the server answers); `doctor --clients` shows, then with `--yes` runs, the live client compatibility matrix of the running server; `status` and `health` ask the running server; `logs` reads its log file.",
    docs: "docs/cli.md",
    api: "gw-version-manager"
  },
  "cli-providers": {
    title: "Providers (CLI)",
    description: "Browse the provider catalog and add, list, test and validate provider connections from the command line.",
    overview: "Most provider commands work on the local database (no server needed); `provider` talks to the running server.",
    docs: "docs/providers.md",
    api: "gw-providers"
  },
  "cli-keys": {
    title: "API keys, people and teams (CLI)",
    description: "Create, list and remove gateway API keys, and the users and teams that own them, from the command line.",
    overview:
      "A new key's secret is printed once; `keys add --user` or `--team` gives it an owner. `gateway users` and `gateway teams` work on the local database, or on a running gateway with `--url` (docs/teams.md).",
    docs: "docs/auth.md",
    api: "gw-api-keys"
  },
  "cli-models": {
    title: "Models (CLI)",
    description: "List the models the running gateway serves, for all providers or one.",
    overview: "The list is the live catalog of the running server.",
    docs: "docs/routing.md",
    api: "gw-models"
  },
  "cli-chat": {
    title: "Chat round trips (CLI)",
    description: "Send a test request through the running gateway from the command line.",
    overview: "A live round trip proves that a client, the gateway and an upstream talk to each other.",
    docs: "docs/cli.md",
    api: "gw-inference"
  },
  "cli-routing": {
    title: "Combos (CLI)",
    description:
      "List, create, switch and delete combos from the command line, report how their shadow targets compare, and replay recorded traffic against candidate models.",
    overview:
      "Combos are the gateway's named routes over several models; `gateway shadow report <combo>` compares a combo's shadow targets with what answered, and `gateway replay --session <id> --model <m>` sends a recorded session to candidates and reports them the same way.",
    docs: "docs/routing.md",
    api: "gw-combos-routing"
  },
  "cli-resilience": {
    title: "Resilience (CLI)",
    description: "Inspect and reset breakers, cooldowns and lockouts from the command line.",
    overview: "Resilience state lives in the running server.",
    docs: "docs/resilience.md",
    api: "gw-resilience"
  },
  "cli-compression": {
    title: "Compression (CLI)",
    description: "Preview prompt compression, manage compression combos and settings, and read the savings from the command line.",
    overview:
      "`gateway compression` works on the local database (a running server sees changes within a second): preview what a mode does to a request body, run rtk over a command's output, create and assign compression combos, change the compression settings, read the tokens and cost saved.",
    docs: "docs/compression.md",
    api: "gw-compression"
  },
  "cli-contexts": {
    title: "Context engines (CLI)",
    description: "Manage the memory entries and skills injected into requests' system prompts from the command line.",
    overview:
      "`gateway context` works on the local database (a running server sees changes within a second): memory entries (global, per API key or per session, with tags) and skills (from the agent-skill catalog or custom, with an always, keyword or model trigger) added to the system prompt of matching requests within the token budget; `x-gateway-no-memory: true` skips both.",
    docs: "docs/compression.md",
    api: "gw-context-rtk"
  },
  "cli-cost-usage": {
    title: "Cost, quotas and cache (CLI)",
    description: "See budgets, token limits and cache statistics from the command line, and clear the cache.",
    overview: "The figures are the running server's own counts.",
    docs: "docs/accounting.md",
    api: "gw-budget"
  },
  "cli-mcp": {
    title: "MCP server (CLI)",
    description: "Run the gateway's MCP server over stdio and check or restart it from the command line.",
    overview: "`gateway --mcp` serves MCP over stdio instead of HTTP.",
    docs: "docs/cli.md",
    api: "gw-mcp"
  },
  "cli-a2a": {
    title: "A2A (CLI)",
    description: "Check the running gateway's A2A endpoint and print its agent card from the command line.",
    overview:
      "Both commands read the agent card the server publishes at `/.well-known/agent-card.json`; `status` also calls the endpoint it names.",
    docs: "docs/skills.md",
    api: "gw-agents-a2a"
  },
  "cli-tunnel": {
    title: "Tunnels (CLI)",
    description: "List, create and stop tunnels to the gateway from the command line.",
    overview: "Tunnels give the gateway a public address.",
    docs: "docs/cli.md",
    api: "gw-tunnels"
  },
  "cli-backup-sync": {
    title: "Backups (CLI)",
    description: "Back up and restore the gateway's database from the command line.",
    overview: "Backups are consistent copies of the SQLite database.",
    docs: "docs/operations.md",
    api: "gw-db-backups"
  },
  "cli-policy-audit": {
    title: "Policies and audit (CLI)",
    description: "Manage request policies and read the audit log from the command line.",
    overview: "Policies and the audit log live on the running server.",
    docs: "docs/guardrails.md",
    api: "gw-settings"
  },
  "cli-batches": {
    title: "Batches (CLI)",
    description: "Submit and follow batch jobs from the command line.",
    overview: "Batches run lines of requests through the gateway in the background.",
    docs: "docs/files-batches.md",
    api: "gw-inference"
  },
  "cli-eval": {
    title: "Evals (CLI)",
    description: "Create eval sets and run them against models through the running gateway from the command line.",
    overview: "An eval run sends each case through the gateway and scores the answers.",
    docs: "docs/guardrails.md",
    api: "gw-models"
  },
  "cli-plugins-skills": {
    title: "Plugins and skills (CLI)",
    description: "Work with the gateway's agent skills and plugins from the command line.",
    overview:
      "The agent-skill files are regenerated with `npm run skills:generate` or `POST /api/agent-skills/generate`. `gateway plugins` installs (from a folder or .tgz), enables, configures and removes plugins of the running server (docs/plugins.md).",
    docs: "docs/skills.md",
    api: "gw-agents-a2a"
  },
  "cli-setup": {
    title: "Setup and recovery (CLI)",
    description: "Set the gateway up (password, admin key, first provider), configure coding tools, and recover access.",
    overview:
      "`setup --non-interactive` reads its flags and `GATEWAY_API_KEY`; the recovery commands work on the local database without a server.",
    docs: "docs/cli.md",
    api: "gw-auth"
  }
}

/**
 * Names of the OpenTelemetry semantic conventions the gateway follows: the GenAI conventions as
 * published in semantic-conventions v1.42.0 (`@opentelemetry/semantic-conventions` 1.42.0,
 * "development" stability), and the gateway's own attributes under `gateway.`. Written out here
 * rather than imported from the package's `incubating` entry point, which loads every
 * convention of every domain at start-up.
 */
import type { FailureInfo } from "../resilience/types.js"

export const ATTR = {
  operationName: "gen_ai.operation.name",
  providerName: "gen_ai.provider.name",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  cacheReadTokens: "gen_ai.usage.cache_read.input_tokens",
  cacheCreationTokens: "gen_ai.usage.cache_creation.input_tokens",
  reasoningTokens: "gen_ai.usage.reasoning.output_tokens",
  tokenType: "gen_ai.token.type",
  errorType: "error.type",
  serverAddress: "server.address",
  httpMethod: "http.request.method",
  httpRoute: "http.route",
  httpStatus: "http.response.status_code",
  // the gateway's own
  requestId: "gateway.request.id",
  endpoint: "gateway.endpoint",
  apiKeyId: "gateway.api_key.id",
  routeKind: "gateway.route.kind",
  combo: "gateway.combo",
  strategy: "gateway.strategy",
  fallbackAttempts: "gateway.fallback.attempts",
  cacheHit: "gateway.cache.hit",
  costUsd: "gateway.cost.usd",
  attempt: "gateway.attempt",
  connection: "gateway.connection",
  probe: "gateway.probe",
  stream: "gateway.stream",
  ttftSeconds: "gen_ai.response.time_to_first_chunk"
} as const

/** Usage labels (`chat.completions`, `embeddings`, ...) as `gen_ai.operation.name`; others keep their label. */
const OPERATIONS: Readonly<Record<string, string>> = {
  "chat.completions": "chat",
  messages: "chat",
  responses: "chat",
  "responses.ws": "chat",
  "api.chat": "chat",
  generateContent: "generate_content",
  streamGenerateContent: "generate_content",
  completions: "text_completion",
  "api.generate": "text_completion",
  embeddings: "embeddings",
  embedContent: "embeddings",
  batchEmbedContents: "embeddings",
  "api.embed": "embeddings",
  "api.embeddings": "embeddings"
}

export const operationName = (endpoint: string | undefined): string =>
  endpoint === undefined ? "chat" : (OPERATIONS[endpoint] ?? endpoint)

/** `error.type` of an upstream failure: the upstream's status, or what happened to the connection. */
export const failureType = (failure: FailureInfo): string => (failure.kind === "http" ? String(failure.status) : failure.kind)

/** `error.type` of an answer's status (empty when it succeeded). */
export const statusErrorType = (status: number): string => (status === 499 ? "client_closed" : status >= 400 ? String(status) : "")

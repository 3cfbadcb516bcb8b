// Refuses requests by a rule with a custom 429: models starting with `modelPrefix`, at most
// `perMinute` requests a minute per API key (counted in this plugin's memory: a restart forgets).
import { blockRequest, config, definePlugin } from "gateway/plugin-sdk"

const windows = new Map()

export const decide = (ctx, settings = config, now = Date.now()) => {
  if (!String(ctx.model).startsWith(settings.modelPrefix ?? "")) return undefined
  const key = ctx.apiKeyId ?? "anonymous"
  const minute = Math.floor(now / 60_000)
  const w = windows.get(key)
  const count = w && w.minute === minute ? w.count + 1 : 1
  windows.set(key, { minute, count })
  if (count <= settings.perMinute) return undefined
  const message = String(settings.message).replaceAll("{perMinute}", String(settings.perMinute)).replaceAll("{model}", String(ctx.model))
  const retryAfter = 60 - Math.floor((now % 60_000) / 1000)
  return blockRequest({
    status: 429,
    headers: { "retry-after": String(retryAfter) },
    body: { error: { type: "rate_limit_exceeded", code: "plugin_rule", message } }
  })
}

export default definePlugin({
  name: "rate-rule-blocker",
  onRequest: (ctx) => decide(ctx)
})

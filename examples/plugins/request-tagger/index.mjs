// Adds metadata (the request's team, from its x-team header or the configured default) that later
// hooks and plugins read as ctx.metadata.team, and a response header with it.
import { addMetadata, addResponseHeaders, config, definePlugin } from "gateway/plugin-sdk"

export const tag = (ctx, settings = config) => {
  const team = ctx.headers["x-team"] || settings.defaultTeam
  return [addMetadata({ team }), addResponseHeaders({ [settings.header]: team })]
}

export default definePlugin({
  name: "request-tagger",
  onRequest: (ctx) => tag(ctx),
  onResponse: (ctx) => {
    console.log(`${ctx.requestId} ${ctx.model} team=${ctx.metadata.team} status=${ctx.status}`)
  }
})

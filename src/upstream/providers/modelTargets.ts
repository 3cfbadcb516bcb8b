import * as Either from "effect/Either"
import { findProvider } from "../../domain/catalog/catalog.js"
import { ModelNotFound, type ResolvedTarget } from "./connection.js"
import type { Snapshot } from "./connectionSnapshot.js"

/**
 * The enabled connections that serve a model id, best priority first (ConnectionsShape.targets):
 * a connection name gives that connection; a provider id (or a node's prefix) gives all its
 * connections; a bare id gives every connection serving exactly that id.
 */
export const targetsIn = (s: Snapshot, model: string): Either.Either<ReadonlyArray<ResolvedTarget>, ModelNotFound> => {
  const slash = model.indexOf("/")
  if (slash > 0) {
    const prefix = model.slice(0, slash)
    const rest = model.slice(slash + 1)
    const named = s.byName.get(prefix.toLowerCase())
    // A node's prefix names all its connections, even when one of them is named by it.
    const nodeWide = named?.provider.node !== undefined && named.provider.node.prefix === prefix.toLowerCase()
    if (named?.enabled && rest && !nodeWide) return Either.right([{ connection: named, model: rest }])
    // A disabled connection named like its provider does not hide the provider's others.
    const forProvider = s.byProvider.get(prefix.toLowerCase())
    if (forProvider && forProvider.length > 0 && rest) return Either.right(forProvider.map((connection) => ({ connection, model: rest })))
    if (named && rest) {
      return Either.left(new ModelNotFound({ message: `provider connection '${named.name}' is disabled` }))
    }
  }
  // A bare id (or one whose slash belongs to the model, as on OpenRouter): the enabled
  // connections that serve exactly this model id, best priority first.
  const serving = s.byModel.get(model)
  if (serving) return Either.right(serving.map((connection) => ({ connection, model })))
  const known =
    findProvider(slash > 0 ? model.slice(0, slash) : "") ?? (slash > 0 ? s.nodeBy.get(model.slice(0, slash).toLowerCase()) : undefined)
  const prefixes = Array.from(new Set(s.all.filter((c) => c.enabled).map((c) => c.name))).sort()
  return Either.left(
    new ModelNotFound({
      message: known
        ? `model '${model}' is not available: provider ${known.id} has no enabled connection (add one with POST /api/providers or \`gateway setup\`)`
        : prefixes.length === 0
          ? `model '${model}' is not available: no provider is connected yet (add one with POST /api/providers or \`gateway setup\`)`
          : `model '${model}' is not available: use <provider>/<model> with one of: ${prefixes.join(", ")}`
    })
  )
}

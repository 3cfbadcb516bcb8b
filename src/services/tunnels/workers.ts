/**
 * Tunnels under `--workers N`: worker 1 runs the backends, the others follow it over the `tunnels` channel; secrets
 * are sealed before they go on it (docs/tunnels.md#with---workers-n-and-several-gateways).
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as os from "node:os"
import type { TunnelKind } from "../../domain/tunnels.js"
import { HostPolicy } from "../../platform/http/HostPolicy.js"
import type { SharedStateShape } from "../../platform/state/SharedState.js"
import { Secrets, type SecretsShape } from "../../platform/store/Secrets.js"
import type { MeshEnableOptions, TunnelView, TunnelsShape } from "./Tunnels.js"

type Views = Record<TunnelKind, TunnelView>
type Command =
  | { readonly op: "quick"; readonly action: "enable" | "disable" }
  | { readonly op: "token"; readonly action: "enable" | "disable"; readonly authToken?: string }
  | { readonly op: "meshEnable"; readonly options: MeshEnableOptions }
  | { readonly op: "meshDisable"; readonly sudoPassword?: string }
type Message =
  | { readonly t: "hello"; readonly node: string }
  | { readonly t: "status"; readonly node: string; readonly views: Views }
  | { readonly t: "command"; readonly node: string; readonly id: string; readonly command: Command }
  | { readonly t: "done"; readonly node: string; readonly id: string; readonly view: TunnelView }
  | { readonly t: "failed"; readonly node: string; readonly id: string; readonly error: string }

const TOPIC = "tunnels"
/** This gateway: the workers of one `gateway --workers N` share the id their primary gave them. */
const node = () => process.env.GATEWAY_CLUSTER_ID ?? `${os.hostname()}:${process.ppid}`
/** How long a follower waits for worker 1 (an enable of the mesh funnel waits up to 20 s there). */
const ANSWER_MS = 30_000

interface Local {
  readonly service: TunnelsShape
  readonly views: () => Views
  readonly onChange: (f: () => void) => void
}

/** A command's secrets opened (they travel sealed). */
const open = (secrets: SecretsShape, sealed: string | undefined) =>
  sealed === undefined ? Effect.succeed(undefined) : Effect.map(secrets.decrypt(sealed), (r) => Redacted.value(r))

const run = (service: TunnelsShape, secrets: SecretsShape, c: Command) =>
  Effect.gen(function* () {
    switch (c.op) {
      case "quick":
        return yield* service.quick(c.action)
      case "token":
        return yield* service.token(c.action, yield* open(secrets, c.authToken))
      case "meshEnable": {
        const sudoPassword = yield* open(secrets, c.options.sudoPassword)
        return yield* service.mesh.enable({ ...c.options, sudoPassword })
      }
      case "meshDisable":
        return yield* service.mesh.disable(yield* open(secrets, c.sudoPassword))
    }
  })

/** Worker 1: publishes every change of status, answers hellos and runs the followers' commands. */
export const leadWorkers = (shared: SharedStateShape, local: Local) =>
  Effect.map(Secrets, (secrets) => {
    const me = node()
    const channel = shared.channel<Message>(TOPIC, (m) => {
      if (m.node !== me) return
      if (m.t === "hello") channel.publish({ t: "status", node: me, views: local.views() })
      else if (m.t === "command")
        void Effect.runPromise(run(local.service, secrets, m.command)).then(
          (view) => channel.publish({ t: "done", node: me, id: m.id, view }),
          () => {}
        )
    })
    local.onChange(() => channel.publish({ t: "status", node: me, views: local.views() }))
  })

/** Workers 2..N: the status worker 1 published; commands handed to it. */
export const followLeader = (shared: SharedStateShape, local: Local) =>
  Effect.gen(function* () {
    const hostPolicy = yield* HostPolicy
    const secrets = yield* Secrets
    const seal = (plain: string | undefined) => (plain === undefined ? undefined : secrets.encrypt(plain))
    const me = node()
    let views: Views | undefined
    const waiting = new Map<string, (answer: { view: TunnelView } | { error: string }) => void>()
    const settled = new Set<() => void>()
    // The running tunnels' public hosts are this worker's names too (DNS-rebinding check of /mcp).
    let hosts: Scope.CloseableScope | undefined
    const allowHosts = (v: Views) => {
      if (hosts) Effect.runSync(Scope.close(hosts, Exit.void))
      hosts = Effect.runSync(Scope.make())
      for (const s of Object.values(v)) {
        if (s.phase !== "running" || !s.publicUrl) continue
        try {
          Effect.runSync(Scope.extend(hostPolicy.addPublicHost(new URL(s.publicUrl).host), hosts))
        } catch {
          // not a URL
        }
      }
    }
    const channel = shared.channel<Message>(TOPIC, (m) => {
      if (m.node !== me) return
      if (m.t === "status") {
        views = m.views
        allowHosts(m.views)
        for (const f of [...settled]) f()
      } else if (m.t === "done") waiting.get(m.id)?.({ view: m.view })
      else if (m.t === "failed") waiting.get(m.id)?.({ error: m.error })
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => hosts && Effect.runSync(Scope.close(hosts, Exit.void))))
    channel.publish({ t: "hello", node: me })

    const current = Effect.gen(function* () {
      if (views !== undefined) return views
      channel.publish({ t: "hello", node: me })
      yield* Effect.async<void>((resume) => {
        const done = () => {
          settled.delete(done)
          resume(Effect.void)
        }
        settled.add(done)
        return Effect.sync(() => settled.delete(done))
      }).pipe(Effect.timeout("2 seconds"), Effect.ignore)
      return views
    })
    const unknown = (kind: TunnelKind): TunnelView => ({
      phase: "error",
      running: false,
      publicUrl: null,
      apiUrl: null,
      targetUrl: null,
      lastError: `worker 1 of this gateway, which runs the tunnels, did not answer (${kind})`,
      ...(kind === "mesh" ? { tunnelUrl: null } : {})
    })
    const ask = (command: Command, kind: TunnelKind) =>
      Effect.async<TunnelView>((resume) => {
        const id = `${process.pid}-${Math.random().toString(36).slice(2)}`
        waiting.set(id, (answer) => {
          waiting.delete(id)
          resume(
            Effect.succeed("view" in answer ? answer.view : { ...unknown(kind), lastError: `worker 1 could not do it: ${answer.error}` })
          )
        })
        channel.publish({ t: "command", node: me, id, command })
        return Effect.sync(() => waiting.delete(id))
      }).pipe(
        Effect.timeout(`${ANSWER_MS} millis`),
        Effect.catchAll(() => Effect.succeed(unknown(kind)))
      )

    const service: TunnelsShape = {
      status: (kind) => Effect.map(current, (v) => v?.[kind] ?? unknown(kind)),
      quick: (action) => ask({ op: "quick", action }, "quick"),
      token: (action, authToken) =>
        ask({ op: "token", action, ...(authToken === undefined ? {} : { authToken: seal(authToken)! }) }, "token"),
      mesh: {
        ...local.service.mesh,
        enable: (options) => ask({ op: "meshEnable", options: { ...options, sudoPassword: seal(options.sudoPassword) } }, "mesh"),
        disable: (sudoPassword) =>
          ask({ op: "meshDisable", ...(sudoPassword === undefined ? {} : { sudoPassword: seal(sudoPassword)! }) }, "mesh")
      },
      open: Effect.map(current, (v) =>
        v === undefined
          ? []
          : (["quick", "token", "mesh"] as const).flatMap((kind) =>
              v[kind].phase === "running" ? [{ kind, publicUrl: v[kind].publicUrl ?? null }] : []
            )
      ),
      // Worker 1 gives its own address to its tunnels; the workers share the port.
      setTarget: () => Effect.void
    }
    return service
  })

/**
 * What `GET /api/tools/agent-bridge/capture-modes` shows: each capture mode's state (running, its
 * port, its last error), the system proxy's recorded changes and guard, the local CA and how to
 * trust it, and the inspector's buffer.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs/promises"
import type { CaptureModes } from "../../domain/inspector.js"
import { caPemPath } from "./capture/ca.js"
import type { SystemProxy } from "./capture/systemProxy.js"
import type { CaptureState, ListenerSettings } from "./captureState.js"
import type { InspectorShape } from "./Inspector.js"
import { INSPECTOR_CA_PATH } from "./paths.js"

type Modes = typeof CaptureModes.Type

export interface CaptureStatusDeps {
  readonly inspector: InspectorShape
  readonly state: CaptureState
  readonly ca: ListenerSettings["ca"]
  readonly systemProxy: SystemProxy
}

/** The capture modes as they are now (one effect, made once per layer). */
export const captureStatus = ({ inspector, state, ca, systemProxy }: CaptureStatusDeps): Effect.Effect<Modes> =>
  Effect.gen(function* () {
    const { config } = inspector
    const caPath = caPemPath(config.caDir)
    const caExists = yield* Effect.promise(() =>
      fs.access(caPath).then(
        () => true,
        () => false
      )
    )
    const fingerprint = caExists ? (yield* Effect.promise(() => ca())).fingerprint256 : null
    const memory = inspector.core.memory()
    const status = yield* Effect.promise(() => systemProxy.status())
    return {
      agentBridge: { enabled: true, capturingBodies: inspector.core.wantsBodies(), subscribers: inspector.core.subscriberCount() },
      customHosts: {
        hosts: state.hosts,
        hostsFile: config.hostsFile,
        mitm: { running: state.mitm !== undefined, port: state.mitm?.port ?? config.mitmPort, error: state.mitmError }
      },
      httpProxy: {
        running: state.proxy !== undefined,
        host: "127.0.0.1",
        port: state.proxy?.port ?? config.httpProxyPort,
        error: state.proxyError,
        url: state.proxy ? `http://127.0.0.1:${state.proxy.port}` : null
      },
      systemProxy: {
        applied: status.applied,
        appliedAt: status.appliedAt,
        guardMinutes: config.systemProxyGuardMinutes,
        revertsAt: status.appliedAt !== null ? status.appliedAt + config.systemProxyGuardMinutes * 60_000 : null,
        changes: status.changes,
        notes: state.systemApplied?.notes ?? [],
        error: state.systemError
      },
      tlsIntercept: { enabled: state.intercept },
      ca: {
        fingerprint256: fingerprint,
        pemUrl: INSPECTOR_CA_PATH,
        path: caExists ? caPath : null,
        trust: [
          `curl: curl --cacert ${caPath} -x http://127.0.0.1:${state.proxy?.port ?? config.httpProxyPort} https://...`,
          `Node: NODE_EXTRA_CA_CERTS=${caPath} (with HTTPS_PROXY and NODE_USE_ENV_PROXY=1 on Node 22+)`,
          `Python: REQUESTS_CA_BUNDLE / SSL_CERT_FILE=${caPath}`,
          `Debian/Ubuntu system store: cp ${caPath} /usr/local/share/ca-certificates/gateway-inspector-ca.crt && update-ca-certificates`
        ]
      },
      buffer: {
        entries: memory.entries,
        bufferSize: memory.bufferSize,
        bodyBytes: memory.bodyBytes,
        maxBodyBytes: memory.maxBodyBytes,
        maskSecrets: config.maskSecrets
      }
    }
  })

import { api, ok } from "../../api/client"
import { Badge, Button, fmtBytes, fmtNumber, Loader, Section, useLoad } from "../../ui"
import type { HttpProxyState, SystemProxyState } from "./api"
import { CustomHosts } from "./CustomHosts"
import { HttpProxy } from "./HttpProxy"
import { LocalCa } from "./LocalCa"
import { SystemProxy } from "./SystemProxy"
import { TransparentCapture } from "./TransparentCapture"

/**
 * The capture modes (GET capture-modes): the agent bridge (this gateway's own traffic) and the
 * ways to bring other programs' traffic in, each panel with its own state and actions.
 */
export const CaptureModes = () => {
  const modes = useLoad(() => ok(api.GET("/api/tools/traffic-inspector/capture-modes")))
  return (
    <Section title="Capture modes" actions={<Button onClick={modes.reload}>Refresh</Button>}>
      <Loader of={modes}>
        {(m) => (
          <div class="insp-modes">
            <div class="insp-mode" aria-label="Agent bridge" role="group">
              <h3>
                Agent bridge <Badge kind={m.agentBridge.enabled ? "ok" : "muted"}>{m.agentBridge.enabled ? "on" : "off"}</Badge>
              </h3>
              <p class="muted small">
                Every request through this gateway, with the upstream side.{" "}
                {m.agentBridge.capturingBodies
                  ? "Bodies are kept now"
                  : "Bodies are kept while an inspector client is connected or a session records"}{" "}
                ({fmtNumber(m.agentBridge.subscribers)} client{m.agentBridge.subscribers === 1 ? "" : "s"} connected). Buffer:{" "}
                {fmtNumber(m.buffer.entries)} of {fmtNumber(m.buffer.bufferSize)} entries, {fmtBytes(m.buffer.bodyBytes)} of{" "}
                {fmtBytes(m.buffer.maxBodyBytes)} bodies; secrets {m.buffer.maskSecrets ? "masked" : "kept"}.
              </p>
            </div>
            <HttpProxy state={m.httpProxy as HttpProxyState} tls={m.tlsIntercept.enabled} reload={modes.reload} />
            <SystemProxy state={m.systemProxy as SystemProxyState} reload={modes.reload} />
            <CustomHosts />
            <TransparentCapture />
            <LocalCa ca={m.ca} reload={modes.reload} />
          </div>
        )}
      </Loader>
    </Section>
  )
}

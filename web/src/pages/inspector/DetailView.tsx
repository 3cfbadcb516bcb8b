import type { ComponentChildren } from "preact"
import { Badge, fmtBytes, fmtDate, fmtMoney, fmtMs, fmtNumber } from "../../ui"
import { Annotation } from "./Annotation"
import type { Detail, Upstream } from "./api"
import { BodyView } from "./BodyView"
import { Conversation } from "./Conversation"
import { Headers } from "./Headers"
import { Replay } from "./Replay"
import { Status } from "./Status"
import { UpstreamView } from "./UpstreamView"

const Facts = (p: { items: ReadonlyArray<[string, ComponentChildren]> }) => (
  <dl class="insp-facts">
    {p.items.map(([k, v]) => (
      <div key={k}>
        <dt>{k}</dt>
        <dd>{v === null || v === undefined || v === "" ? "—" : v}</dd>
      </div>
    ))}
  </dl>
)

/**
 * The structured-output verdict of an answer (docs/structured-outputs.md): the
 * `X-Gateway-Schema` header of a whole answer, or a stream's last event (when its body was kept).
 */
const schemaVerdict = (e: Detail): ComponentChildren => {
  const header = e.responseHeaders?.["x-gateway-schema"]
  const body = e.responseBody?.encoding === "utf8" ? e.responseBody.text : ""
  const status = header ?? /gateway[_.]?schema"[^}]*?"status":"(valid|repaired|invalid)"/i.exec(body)?.[1]
  if (status === undefined) return null
  return <Badge kind={status === "valid" ? "ok" : status === "repaired" ? "warn" : "bad"}>{status}</Badge>
}

/** A request's details (GET requests/{id}): its facts, note, LLM call and replay, conversation, upstream side, headers and bodies. */
export const DetailView = (p: { entry: Detail; onOpen: (id: string) => void }) => {
  const e = p.entry
  const llm = e.llm
  const upstream = e.upstream as ReadonlyArray<Upstream>
  const ids = (list: ReadonlyArray<string>) =>
    list.length === 0
      ? null
      : list.map((id) => (
          <button type="button" class="insp-link insp-id" key={id} onClick={() => p.onOpen(id)}>
            {id}
          </button>
        ))
  return (
    <div class="insp-detail">
      {e.error && (
        <p class="error-box" role="note">
          {e.error}
        </p>
      )}
      <p class="mono insp-wrap insp-url">
        {e.method} {e.url}
      </p>
      <Facts
        items={[
          ["Status", <Status status={e.status} key="s" />],
          ["Source", e.source],
          ["Kind", e.detectedKind],
          ["Protocol", `${e.tls ? "HTTPS" : "HTTP"} ${e.httpVersion}${e.tunnelOnly ? " (tunnel, not intercepted)" : ""}`],
          ["Started", fmtDate(e.timings.startedAt)],
          ["First byte", fmtMs(e.timings.ttfbMs)],
          ["Total", fmtMs(e.timings.totalMs)],
          ["Request size", fmtBytes(e.requestSize)],
          ["Response size", fmtBytes(e.responseSize)],
          [
            "Process",
            e.processName ? `${e.processName}${e.pid !== null ? ` (pid ${e.pid})` : ""}` : e.pid !== null ? `pid ${e.pid}` : null
          ],
          ["Agent", e.agent],
          ["Gateway request", e.requestId],
          ["Context", e.contextKey],
          ["Replay of", e.replayOf ? ids([e.replayOf]) : null],
          ["Replays", ids(e.replays)],
          ["Sessions", e.sessionIds.length > 0 ? e.sessionIds.join(", ") : null]
        ]}
      />
      <Annotation entry={e} />
      {llm && (
        <>
          <h3>LLM call</h3>
          <Facts
            items={[
              ["Provider", llm.provider],
              ["API", llm.apiKind],
              ["Model", llm.model],
              ["Mapped to", llm.mappedTo],
              ["Streamed", llm.streamed ? "yes" : "no"],
              ["Turns", fmtNumber(llm.messages)],
              ["Tokens in", fmtNumber(llm.tokensIn)],
              ["Tokens out", fmtNumber(llm.tokensOut)],
              ["Cost (estimate)", llm.costEstimateUsd === null ? null : `≈ ${fmtMoney(llm.costEstimateUsd)} (estimate)`],
              ...(schemaVerdict(e) === null ? [] : [["Structured output", schemaVerdict(e)] as [string, ComponentChildren]])
            ]}
          />
          <Replay entry={e} onOpen={p.onOpen} />
        </>
      )}
      {e.conversation && (
        <>
          <h3>Conversation</h3>
          <Conversation conversation={e.conversation} />
        </>
      )}
      {upstream.length > 0 && (
        <>
          <h3>Upstream</h3>
          <UpstreamView exchanges={upstream} client={e.requestBody} />
        </>
      )}
      <details class="insp-more">
        <summary>Headers</summary>
        <div class="insp-pair">
          <Headers label="Request headers" headers={e.requestHeaders} />
          <Headers label="Response headers" headers={e.responseHeaders} />
        </div>
      </details>
      <details class="insp-more" open={!e.conversation}>
        <summary>Bodies</summary>
        <div class="insp-pair">
          <BodyView label="Request body" body={e.requestBody} />
          <BodyView label="Response body" body={e.responseBody} />
        </div>
      </details>
    </div>
  )
}

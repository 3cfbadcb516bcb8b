import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Link } from "../router"
import { Button, Dialog, fmtNumber, Loader, Page, Section, Stat, useAction, useInterval, useLoad } from "../ui"
import "./Cache.css"

export default function CachePage() {
  const stats = useLoad(() => ok(api.GET("/api/cache/stats")))
  useInterval(stats.reload, 10_000)
  const [confirming, setConfirming] = useState(false)
  const [run, busy] = useAction()
  const clear = () =>
    run(
      () => ok(api.DELETE("/api/cache/stats")),
      (r) =>
        `Cache cleared: ${fmtNumber(r.cleared.memory)} in memory, ${fmtNumber(r.cleared.db)} stored, ${fmtNumber(r.cleared.idempotencyKeys)} idempotency keys`
    ).then(() => {
      setConfirming(false)
      stats.reload()
    })
  return (
    <Page
      title="Cache"
      description="Answers to repeatable requests (temperature 0 or a seed, not streamed) are kept and served again without calling the upstream."
      actions={
        <Button kind="danger" onClick={() => setConfirming(true)}>
          Clear cache
        </Button>
      }
    >
      <Loader of={stats}>
        {(s) => {
          const c = s.semanticCache
          const lookups = c.hits + c.misses
          return (
            <>
              <Section title="Response cache">
                <div class="stats" aria-label="Response cache statistics">
                  <Stat
                    label="Hit rate"
                    value={lookups ? `${(c.hitRate * 100).toFixed(1)} %` : "—"}
                    hint={lookups ? `${fmtNumber(lookups)} lookups since start` : "No cacheable request yet"}
                  />
                  <Stat
                    label="Hits"
                    value={fmtNumber(c.hits)}
                    hint={c.similarHits ? `${fmtNumber(c.similarHits)} by similarity` : undefined}
                  />
                  <Stat label="Misses" value={fmtNumber(c.misses)} />
                  <Stat
                    label="In memory"
                    value={`${fmtNumber(c.memorySize)} / ${fmtNumber(c.memoryMaxSize)}`}
                    hint="entries (most recent kept)"
                  />
                  <Stat label="Stored" value={fmtNumber(c.dbSize)} hint="entries in the database" />
                  <Stat label="Time to live" value={`${fmtNumber(c.ttlSeconds)} s`} />
                  <Stat
                    label="Similarity matching"
                    value={c.embeddingModel ?? "off"}
                    hint={c.embeddingModel ? "embedding model" : "exact matches only"}
                  />
                </div>
                {lookups === 0 && (
                  <p class="muted">
                    Nothing looked up yet. A non-streamed request with <code>temperature: 0</code> or a <code>seed</code> is cached; the
                    second identical one answers with <code>X-Gateway-Cache: HIT</code>. Send <code>X-Gateway-No-Cache: true</code> to
                    bypass it.
                  </p>
                )}
              </Section>
              <Section title="Idempotency">
                <div class="stats" aria-label="Idempotency statistics">
                  <Stat label="Active keys" value={fmtNumber(s.idempotency.activeKeys)} hint="requests in flight or answered recently" />
                  <Stat
                    label="Window"
                    value={`${fmtNumber(s.idempotency.windowMs / 1000)} s`}
                    hint="a repeat within it gets the same answer"
                  />
                </div>
                <p class="muted">
                  A request with an <code>Idempotency-Key</code> (or <code>X-Request-Id</code>) header sent again while the first runs, or
                  just after, gets the first one's answer instead of a second upstream call.
                </p>
              </Section>
            </>
          )
        }}
      </Loader>
      <Section title="Settings">
        <p>
          The cache is configured when the gateway starts (environment variables); its on/off switches are feature flags you can change at
          run time:
        </p>
        <dl class="settings-list">
          <dt>
            <code>GATEWAY_SEMANTIC_CACHE_ENABLED</code>
          </dt>
          <dd>
            Turns the response cache on or off (default on): change it on <Link to="/flags">Feature flags</Link>.
          </dd>
          <dt>
            <code>GATEWAY_IDEMPOTENCY_ENABLED</code>
          </dt>
          <dd>
            Turns idempotency de-duplication on or off (default on): also on <Link to="/flags">Feature flags</Link>.
          </dd>
          <dt>
            <code>GATEWAY_CACHE_TTL_SECONDS</code>
          </dt>
          <dd>How long an answer is kept (default 3600).</dd>
          <dt>
            <code>GATEWAY_CACHE_MAX_ENTRIES</code>
          </dt>
          <dd>Answers kept in memory (default 1000); older ones stay in the database until they expire.</dd>
          <dt>
            <code>GATEWAY_CACHE_EMBEDDING_MODEL</code>, <code>GATEWAY_CACHE_SIMILARITY</code>
          </dt>
          <dd>Match near-identical prompts by embedding similarity (off unless a model is set; threshold default 0.95).</dd>
        </dl>
        <p class="muted">
          The environment variables take effect on restart; docs/accounting.md, “The response cache and idempotency”, explains what is
          cached and why.
        </p>
      </Section>
      <Dialog open={confirming} title="Clear the cache?" onClose={() => setConfirming(false)}>
        <p>
          Every cached answer (memory and database) and every idempotency key is forgotten; the hit counters start again. The next requests
          go upstream.
        </p>
        <div class="actions">
          <Button kind="danger" busy={busy} onClick={() => void clear()}>
            Clear everything
          </Button>
          <Button onClick={() => setConfirming(false)}>Cancel</Button>
        </div>
      </Dialog>
    </Page>
  )
}

import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Empty,
  fmtDate,
  fmtNumber,
  Form,
  Loader,
  NumberInput,
  Page,
  Section,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import "./Models.css"

const price = (n: number | null | undefined) => (n === null || n === undefined ? "—" : n === 0 ? "$0" : `$${n.toFixed(n < 1 ? 3 : 2)}`)
const count = (n: number | null | undefined) => (n ? fmtNumber(n) : "—")

const CatalogSection = () => {
  const [all, setAll] = useState(false)
  const [query, setQuery] = useState("")
  const catalog = useLoad(() => ok(api.GET("/api/models/catalog", { params: { query: { scope: all ? "all" : "connected" } } })), [all])
  const q = query.trim().toLowerCase()
  const LIMIT = 200
  return (
    <Section title="Catalog">
      <div class="catalog-filters">
        <TextInput label="Search models" type="search" value={query} onInput={setQuery} placeholder="gpt-4o, claude, llama…" />
        <Checkbox label="Every provider (not only connected ones)" checked={all} onChange={setAll} />
      </div>
      <Loader of={catalog}>
        {(d) => {
          const rows = q ? d.models.filter((m) => `${m.id} ${m.name} ${m.provider}`.toLowerCase().includes(q)) : d.models
          return (
            <>
              <p class="muted" aria-live="polite">
                {fmtNumber(rows.length)} models{rows.length > LIMIT ? `, the first ${LIMIT} shown: search to narrow` : ""}. Prices in USD
                per 1M tokens.
              </p>
              <Table
                caption="Model catalog"
                rowKey={(m) => m.id}
                rows={rows.slice(0, LIMIT)}
                empty={
                  <Empty title={q ? "No model matches" : "No models yet"}>
                    {q ? (
                      "Try another search."
                    ) : all ? (
                      "The catalog is empty."
                    ) : (
                      <>
                        No connected provider yet: <Link to="/providers">add a provider</Link>, or tick “Every provider”.
                      </>
                    )}
                  </Empty>
                }
                columns={[
                  { label: "Model id", render: (m) => <code>{m.id}</code> },
                  { label: "Name", render: (m) => m.name },
                  { label: "Provider", render: (m) => m.provider },
                  { label: "Context", class: "num", render: (m) => count(m.contextWindow) },
                  { label: "Input", class: "num", render: (m) => price(m.price.input) },
                  { label: "Output", class: "num", render: (m) => price(m.price.output) },
                  {
                    label: "Can",
                    render: (m) => (
                      <span class="caps">
                        {m.custom && <Badge kind="info">custom</Badge>}
                        {m.capabilities.tools && <Badge>tools</Badge>}
                        {m.capabilities.vision && <Badge>vision</Badge>}
                        {m.capabilities.reasoning && <Badge>reasoning</Badge>}
                        {m.capabilities.audio && <Badge>audio</Badge>}
                      </span>
                    )
                  }
                ]}
              />
            </>
          )
        }}
      </Loader>
    </Section>
  )
}

const AliasesSection = () => {
  const aliases = useLoad(() => ok(api.GET("/api/models/alias")))
  const [alias, setAlias] = useState("")
  const [target, setTarget] = useState("")
  const [run, busy] = useAction()
  const add = () =>
    run(async () => {
      await ok(api.POST("/api/models/alias", { body: { alias, target } }))
      setAlias("")
      setTarget("")
      aliases.reload()
    }, `Alias ${alias.trim()} saved`)
  const remove = (a: string) =>
    run(() => ok(api.DELETE("/api/models/alias", { params: { query: { alias: a } } })), `Alias ${a} removed`).then(aliases.reload)
  return (
    <Section title="Aliases">
      <p class="muted">A client asking for the alias gets the target model (any model id: a connection's, a combo's).</p>
      <div class="section-form">
        <Form onSubmit={() => void add()} label="Add an alias">
          <TextInput label="Alias" value={alias} onInput={setAlias} required placeholder="fast" />
          <TextInput label="Target model" value={target} onInput={setTarget} required placeholder="openai/gpt-4o-mini" />
          <Button kind="primary" type="submit" busy={busy}>
            Save alias
          </Button>
        </Form>
      </div>
      <Loader of={aliases}>
        {(d) => (
          <Table
            caption="Model aliases"
            rowKey={(a) => a.alias}
            rows={d.aliases}
            empty={
              <Empty title="No aliases">
                Add one above, e.g. <code>fast</code> → a cheap model, so clients need not know provider ids.
              </Empty>
            }
            columns={[
              { label: "Alias", render: (a) => <code>{a.alias}</code> },
              { label: "Target", render: (a) => <code>{a.target}</code> },
              { label: "Source", render: (a) => <Badge kind={a.source === "user" ? "info" : "muted"}>{a.source}</Badge> },
              {
                label: "Actions",
                render: (a) =>
                  a.source === "user" ? (
                    <Button kind="danger" onClick={() => void remove(a.alias)} aria-label={`Remove alias ${a.alias}`}>
                      Remove
                    </Button>
                  ) : (
                    <span class="muted">built in</span>
                  )
              }
            ]}
          />
        )}
      </Loader>
    </Section>
  )
}

const CustomModelsSection = () => {
  const models = useLoad(() => ok(api.GET("/api/provider-models")))
  const [provider, setProvider] = useState("")
  const [model, setModel] = useState("")
  const [name, setName] = useState("")
  const [contextLength, setContext] = useState<number | undefined>(undefined)
  const [input, setInput] = useState<number | undefined>(undefined)
  const [output, setOutput] = useState<number | undefined>(undefined)
  const [run, busy] = useAction()
  const add = () =>
    run(async () => {
      const p =
        input !== undefined || output !== undefined
          ? { price: { ...(input !== undefined ? { input } : {}), ...(output !== undefined ? { output } : {}) } }
          : {}
      await ok(
        api.POST("/api/provider-models", {
          body: { provider, model, ...(name.trim() ? { name: name.trim() } : {}), ...(contextLength ? { contextLength } : {}), ...p }
        })
      )
      setModel("")
      setName("")
      models.reload()
    }, "Model added")
  const remove = (prov: string, m: string) =>
    run(() => ok(api.DELETE("/api/provider-models", { params: { query: { provider: prov, model: m } } })), `${m} removed`).then(
      models.reload
    )
  return (
    <Section title="Custom models">
      <p class="muted">
        Models a provider serves that the catalog does not know (or corrections to one it knows). The provider is a provider id or a
        connection name.
      </p>
      <div class="section-form">
        <Form onSubmit={() => void add()} label="Add a custom model">
          <TextInput label="Provider or connection" value={provider} onInput={setProvider} required placeholder="openai-compatible" />
          <TextInput label="Model id" value={model} onInput={setModel} required placeholder="llama-3.1-8b" />
          <TextInput label="Display name" value={name} onInput={setName} />
          <NumberInput label="Context window (tokens)" value={contextLength} onInput={setContext} min={1} step={1} />
          <NumberInput label="Input price ($ / 1M)" value={input} onInput={setInput} min={0} />
          <NumberInput label="Output price ($ / 1M)" value={output} onInput={setOutput} min={0} />
          <Button kind="primary" type="submit" busy={busy}>
            Add model
          </Button>
        </Form>
      </div>
      <Loader of={models}>
        {(d) => (
          <Table
            caption="Custom models"
            rowKey={(m) => `${m.provider}/${m.model}`}
            rows={d.models}
            empty={<Empty title="No custom models">The catalog and the connections' own model lists are used as they are.</Empty>}
            columns={[
              { label: "Model", render: (m) => <code>{`${m.provider}/${m.model}`}</code> },
              { label: "Name", render: (m) => m.name ?? "—" },
              { label: "Scope", render: (m) => m.scope },
              { label: "Context", class: "num", render: (m) => count(m.contextLength) },
              {
                label: "Price in / out",
                class: "num",
                render: (m) => (m.price ? `${price(m.price.input)} / ${price(m.price.output)}` : "—")
              },
              {
                label: "Actions",
                render: (m) => (
                  <Button kind="danger" onClick={() => void remove(m.provider, m.model)} aria-label={`Remove ${m.provider}/${m.model}`}>
                    Remove
                  </Button>
                )
              }
            ]}
          />
        )}
      </Loader>
    </Section>
  )
}

type PriceField = "input" | "output" | "cachedInput" | "cacheWrite"
const PricingSection = () => {
  const prices = useLoad(() => ok(api.GET("/api/pricing")))
  const [showAll, setShowAll] = useState(false)
  const [provider, setProvider] = useState("")
  const [model, setModel] = useState("")
  const [values, setValues] = useState<Partial<Record<PriceField, number>>>({})
  const [run, busy] = useAction()
  const setV = (k: PriceField) => (v: number | undefined) => setValues((s) => ({ ...s, [k]: v }))
  const save = () =>
    run(async () => {
      const body = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<Record<PriceField, number>>
      await ok(api.PUT("/api/pricing", { body: { provider, model, ...body } }))
      prices.reload()
    }, "Price saved")
  const remove = (prov: string, m: string) =>
    run(() => ok(api.DELETE("/api/pricing", { body: { provider: prov, model: m } })), "Override removed").then(prices.reload)
  return (
    <Section title="Price overrides">
      <p class="muted">
        Prices (USD per 1M tokens) used for cost accounting. An override replaces the catalog's or the synced price of one model.
      </p>
      <div class="section-form">
        <Form onSubmit={() => void save()} label="Set a price override">
          <TextInput label="Price provider" value={provider} onInput={setProvider} required placeholder="openai" />
          <TextInput label="Price model" value={model} onInput={setModel} required placeholder="gpt-4o-mini" />
          <NumberInput label="Input" value={values.input} onInput={setV("input")} min={0} />
          <NumberInput label="Output" value={values.output} onInput={setV("output")} min={0} />
          <NumberInput label="Cached input" value={values.cachedInput} onInput={setV("cachedInput")} min={0} />
          <NumberInput label="Cache write" value={values.cacheWrite} onInput={setV("cacheWrite")} min={0} />
          <Button kind="primary" type="submit" busy={busy}>
            Save price
          </Button>
        </Form>
      </div>
      <Checkbox label="Show every known price (not only overrides)" checked={showAll} onChange={setShowAll} />
      <Loader of={prices}>
        {(d) => {
          const rows = showAll ? d.prices : d.prices.filter((p) => p.source.includes("override"))
          return (
            <Table
              caption="Prices"
              rowKey={(p) => `${p.provider}/${p.model}/${p.kind ?? ""}`}
              rows={rows.slice(0, 300)}
              empty={<Empty title="No overrides">Catalog prices apply. Set one above to correct a price or price a custom model.</Empty>}
              columns={[
                { label: "Model", render: (p) => <code>{`${p.provider}/${p.model}`}</code> },
                { label: "Input", class: "num", render: (p) => price(p.input) },
                { label: "Output", class: "num", render: (p) => price(p.output) },
                { label: "Cached input", class: "num", render: (p) => price(p.cachedInput) },
                { label: "Source", render: (p) => <Badge kind={p.source.includes("override") ? "info" : "muted"}>{p.source}</Badge> },
                { label: "Overridden", render: (p) => fmtDate(p.overrideUpdatedAt) },
                {
                  label: "Actions",
                  render: (p) =>
                    p.source.includes("override") ? (
                      <Button
                        kind="danger"
                        onClick={() => void remove(p.provider, p.model)}
                        aria-label={`Remove override of ${p.provider}/${p.model}`}
                      >
                        Remove override
                      </Button>
                    ) : (
                      <Button
                        onClick={() => {
                          setProvider(p.provider)
                          setModel(p.model)
                          setValues({ input: p.input, output: p.output, ...(p.cachedInput !== null ? { cachedInput: p.cachedInput } : {}) })
                        }}
                        aria-label={`Override the price of ${p.provider}/${p.model}`}
                      >
                        Override
                      </Button>
                    )
                }
              ]}
            />
          )
        }}
      </Loader>
    </Section>
  )
}

const TABS = [
  { value: "catalog", label: "Catalog" },
  { value: "aliases", label: "Aliases" },
  { value: "custom", label: "Custom models" },
  { value: "pricing", label: "Price overrides" }
] as const

export default function ModelsPage() {
  const [tab, setTab] = useState<(typeof TABS)[number]["value"]>("catalog")
  return (
    <Page
      title="Models & aliases"
      description="Every model the gateway can route to, the short names clients may use, and the prices cost is counted with."
    >
      <div class="tabs" role="group" aria-label="Sections">
        {TABS.map((t) => (
          <button
            key={t.value}
            type="button"
            class={`btn ${tab === t.value ? "btn-primary" : ""}`}
            aria-pressed={tab === t.value}
            onClick={() => setTab(t.value)}
          >
            {t.label}
          </button>
        ))}
      </div>
      {tab === "catalog" && <CatalogSection />}
      {tab === "aliases" && <AliasesSection />}
      {tab === "custom" && <CustomModelsSection />}
      {tab === "pricing" && <PricingSection />}
    </Page>
  )
}

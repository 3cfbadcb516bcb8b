import { useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import type { paths } from "../../api/schema"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  Empty,
  fmtMs,
  Form,
  Loader,
  Section,
  Select,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../../ui"

type Node = paths["/api/provider-nodes"]["get"]["responses"][200]["content"]["application/json"]["nodes"][number]
type NodeTest = paths["/api/provider-nodes/{id}/test"]["post"]["responses"][200]["content"]["application/json"]

/** The families a node can speak (src/domain/nodes.ts NODE_FAMILIES). */
const FAMILIES = ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"] as const
type Family = (typeof FAMILIES)[number]

const NodeForm = (p: { onDone: () => void }) => {
  const [id, setId] = useState("")
  const [name, setName] = useState("")
  const [family, setFamily] = useState<Family>("openai-chat")
  const [baseUrl, setBaseUrl] = useState("")
  const [prefix, setPrefix] = useState("")
  const [models, setModels] = useState("")
  const [run, busy] = useAction()
  const submit = () =>
    run(async () => {
      const ids = models
        .split(/[\s,]+/)
        .map((m) => m.trim())
        .filter(Boolean)
      await ok(
        api.POST("/api/provider-nodes", {
          body: {
            id: id.trim(),
            family,
            baseUrl: baseUrl.trim(),
            ...(name.trim() ? { name: name.trim() } : {}),
            ...(prefix.trim() ? { prefix: prefix.trim() } : {}),
            ...(ids.length ? { models: ids.map((m) => ({ id: m })) } : {})
          }
        })
      )
      p.onDone()
    }, "Provider node added")
  return (
    <Form onSubmit={() => void submit()} label="Add a provider node">
      <TextInput label="Node id" value={id} onInput={setId} required hint="Lower case; becomes a provider id (connections use it)." />
      <TextInput label="Display name" value={name} onInput={setName} />
      <Select label="Family" value={family} options={FAMILIES} onChange={setFamily} hint="The wire format the endpoint speaks." />
      <TextInput
        label="Node base URL"
        type="url"
        value={baseUrl}
        onInput={setBaseUrl}
        required
        placeholder="http://127.0.0.1:8000/v1"
        wide
      />
      <TextInput label="Model prefix" value={prefix} onInput={setPrefix} hint="Default: the node id." />
      <TextInput label="Models" value={models} onInput={setModels} hint="Model ids, separated by commas (or import them with Test)." />
      <Button kind="primary" type="submit" busy={busy}>
        Add node
      </Button>
    </Form>
  )
}

const NodeTester = (p: { node: Node; onDone: () => void }) => {
  const [apiKey, setApiKey] = useState("")
  const [importModels, setImport] = useState(false)
  const [result, setResult] = useState<NodeTest | null>(null)
  const [run, busy] = useAction()
  const submit = () =>
    run(async () => {
      const r = await ok(
        api.POST("/api/provider-nodes/{id}/test", {
          params: { path: { id: p.node.id } },
          body: { ...(apiKey ? { apiKey } : {}), importModels }
        })
      )
      setResult(r)
      if (r.imported.length) p.onDone()
    })
  return (
    <Form onSubmit={() => void submit()} label={`Test ${p.node.name}`}>
      <TextInput
        label="API key for the test"
        type="password"
        autoComplete="off"
        value={apiKey}
        onInput={setApiKey}
        hint="Optional; not stored."
      />
      <Checkbox label="Import the models it lists" checked={importModels} onChange={setImport} />
      {result && (
        <div class={`full test-result ${result.ok ? "test-ok" : "test-bad"}`} role="status">
          <strong>{result.ok ? "✓ The node answers" : "✗ The node test failed"}</strong>
          <span>
            {result.status !== null ? `HTTP ${result.status}` : "no answer"} · {fmtMs(result.latencyMs)} · {result.models.length} models
            {result.imported.length ? ` · imported ${result.imported.length}` : ""}
          </span>
          {result.error && <span class="test-error">{result.error}</span>}
        </div>
      )}
      <Button kind="primary" type="submit" busy={busy}>
        Run test
      </Button>
    </Form>
  )
}

/** Provider nodes: the user's own endpoints of a known family, usable as providers. */
export const NodesSection = () => {
  const nodes = useLoad(() => ok(api.GET("/api/provider-nodes")))
  const [dialog, setDialog] = useState<{ kind: "add" } | { kind: "test"; n: Node } | { kind: "delete"; n: Node } | null>(null)
  const [run, busy] = useAction()
  const close = () => setDialog(null)
  const done = () => {
    close()
    nodes.reload()
  }
  return (
    <Section title="Provider nodes" actions={<Button onClick={() => setDialog({ kind: "add" })}>Add node</Button>}>
      <p class="muted">
        A node is your own endpoint of the OpenAI, Anthropic, Gemini or Ollama family (a self-hosted server, a relay). Once added,
        connections can use its id as their provider.
      </p>
      <Loader of={nodes}>
        {(d) => (
          <Table
            caption="Provider nodes"
            rowKey={(n) => n.id}
            rows={d.nodes}
            empty={
              <Empty title="No provider nodes">
                Add one when you run a compatible server of your own; the catalog's providers need no node.
              </Empty>
            }
            columns={[
              { label: "Node", render: (n) => <strong>{n.name}</strong> },
              { label: "Id / prefix", render: (n) => <code>{n.id === n.prefix ? n.id : `${n.id} / ${n.prefix}`}</code> },
              { label: "Family", render: (n) => <Badge kind="info">{n.family}</Badge> },
              { label: "Base URL", render: (n) => <span class="url">{n.baseUrl}</span> },
              { label: "Models", class: "num", render: (n) => n.models.length },
              { label: "Used by", render: (n) => (n.connections.length ? n.connections.join(", ") : "—") },
              {
                label: "Actions",
                render: (n) => (
                  <div class="row">
                    <Button onClick={() => setDialog({ kind: "test", n })} aria-label={`Test node ${n.name}`}>
                      Test
                    </Button>
                    <Button kind="danger" onClick={() => setDialog({ kind: "delete", n })} aria-label={`Delete node ${n.name}`}>
                      Delete
                    </Button>
                  </div>
                )
              }
            ]}
          />
        )}
      </Loader>
      <Dialog open={dialog?.kind === "add"} title="Add a provider node" onClose={close}>
        {dialog?.kind === "add" && <NodeForm onDone={done} />}
      </Dialog>
      <Dialog open={dialog?.kind === "test"} title={dialog?.kind === "test" ? `Test node ${dialog.n.name}` : "Test node"} onClose={close}>
        {dialog?.kind === "test" && <NodeTester node={dialog.n} onDone={nodes.reload} />}
      </Dialog>
      <Dialog open={dialog?.kind === "delete"} title="Delete this node?" onClose={close}>
        {dialog?.kind === "delete" && (
          <>
            <p>
              Node <strong>{dialog.n.name}</strong> is removed. A node that connections still use cannot be deleted (the API says which).
            </p>
            <div class="actions">
              <Button
                kind="danger"
                busy={busy}
                onClick={() =>
                  void run(
                    () => ok(api.DELETE("/api/provider-nodes/{id}", { params: { path: { id: dialog.n.id } } })),
                    "Node deleted"
                  ).then(done)
                }
              >
                Delete {dialog.n.name}
              </Button>
              <Button onClick={close}>Cancel</Button>
            </div>
          </>
        )}
      </Dialog>
    </Section>
  )
}

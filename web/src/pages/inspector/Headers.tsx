import { Table } from "../../ui"

export const Headers = (p: { label: string; headers: Readonly<Record<string, string>> | null }) => (
  <div>
    <h4>{p.label}</h4>
    {p.headers === null ? (
      <p class="muted small">None (no answer yet).</p>
    ) : (
      <Table
        caption={p.label}
        rowKey={(r) => r[0]}
        rows={Object.entries(p.headers)}
        empty={<p class="muted small">None.</p>}
        columns={[
          { label: "Name", class: "mono", render: (r) => r[0] },
          { label: "Value", class: "mono insp-wrap", render: (r) => r[1] }
        ]}
      />
    )}
  </div>
)

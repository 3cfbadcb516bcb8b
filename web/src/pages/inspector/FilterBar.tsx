import { Checkbox, Select, TextInput } from "../../ui"
import type { Source } from "./api"
import { type Filters, SOURCES, type StatusFilter } from "./filters"

/** The list's filters; the page keeps their value (it also makes the list's query and the HAR link). */
export const FilterBar = (p: { value: Filters; onChange: (f: Filters) => void }) => {
  const set =
    <K extends keyof Filters>(k: K) =>
    (v: Filters[K]) =>
      p.onChange({ ...p.value, [k]: v })
  return (
    <div class="filters insp-filters">
      <Checkbox label="LLM only" checked={p.value.llmOnly} onChange={set("llmOnly")} />
      <Select<Source | "">
        label="Source"
        value={p.value.source}
        options={[{ value: "", label: "any source" }, ...SOURCES.map((s) => ({ value: s, label: s }))]}
        onChange={set("source")}
      />
      <Select<StatusFilter>
        label="Status"
        value={p.value.status}
        options={[
          { value: "", label: "all" },
          { value: "in-flight", label: "in flight" },
          { value: "ok", label: "ok (below 400)" },
          { value: "failed", label: "failed (400 and up, errors)" },
          { value: "2xx", label: "2xx" },
          { value: "4xx", label: "4xx" },
          { value: "5xx", label: "5xx" }
        ]}
        onChange={set("status")}
      />
      <TextInput label="Host" type="search" value={p.value.host} onInput={set("host")} placeholder="api.openai.com" />
      <TextInput label="Agent" type="search" value={p.value.agent} onInput={set("agent")} placeholder="e.g. codex" />
    </div>
  )
}

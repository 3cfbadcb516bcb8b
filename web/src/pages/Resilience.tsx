import { Page } from "../ui"

// Placeholder: this page is being built (docs/dashboard.md lists what each page does).
export default function ResiliencePage() {
  return <Page title="Resilience">This page is not built yet.</Page>
}

import { Page } from "../ui"

// Placeholder: this page is being built (docs/dashboard.md lists what each page does).
export default function ProvidersPage() {
  return <Page title="Providers">This page is not built yet.</Page>
}

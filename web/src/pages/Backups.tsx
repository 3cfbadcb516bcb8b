import { Page } from "../ui"

// Placeholder: this page is being built (docs/dashboard.md lists what each page does).
export default function BackupsPage() {
  return <Page title="Backups">This page is not built yet.</Page>
}

import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { HealthPing } from "../../../domain/auth.js"

export class HealthGroup extends HttpApiGroup.make("health").add(HttpApiEndpoint.get("ping", "/api/health/ping").addSuccess(HealthPing)) {}

import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import { CreateEvalSet, EvalRunView, EvalSetView, StartRun } from "../../../domain/evals.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

const RunPath = Schema.Struct({ id: Schema.String, runId: Schema.String })

/** `/api/evals`: eval sets, and runs of them against models through the gateway (docs/guardrails.md). */
export class EvalsGroup extends HttpApiGroup.make("evals")
  .add(HttpApiEndpoint.get("list", "/api/evals").addSuccess(Schema.Struct({ evals: Schema.Array(EvalSetView) })))
  .add(HttpApiEndpoint.post("create", "/api/evals").setPayload(CreateEvalSet).addSuccess(EvalSetView, { status: 201 }).addError(BadRequest))
  .add(
    HttpApiEndpoint.get("get", "/api/evals/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ eval: EvalSetView, runs: Schema.Array(EvalRunView) }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("run", "/api/evals/:id/runs")
      .setPath(IdPath)
      .setPayload(StartRun)
      .addSuccess(EvalRunView, { status: 202 })
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("getRun", "/api/evals/:id/runs/:runId").setPath(RunPath).addSuccess(EvalRunView).addError(NotFound))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}

/**
 * Routes that are planned (the specification's, or an open issue's) and this build does not serve yet. They answer 501 with a
 * message naming the area, instead of a bare 404, so clients and operators can tell "not
 * built" from "wrong path". README.md lists the same areas.
 */
export interface PlannedArea {
  readonly area: string
  readonly pattern: RegExp
}

/** Client-facing (inference) routes: answered in the OpenAI error format. */
export const PLANNED_INFERENCE: ReadonlyArray<PlannedArea> = []

/** Management routes: answered in the management error format. */
export const PLANNED_MANAGEMENT: ReadonlyArray<PlannedArea> = []

export const findPlanned = (areas: ReadonlyArray<PlannedArea>, path: string): PlannedArea | undefined =>
  areas.find((a) => a.pattern.test(path))

export const plannedMessage = (area: PlannedArea): string => `${area.area} is planned but not built in this version yet`

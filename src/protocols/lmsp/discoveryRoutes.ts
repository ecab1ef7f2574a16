// /lmsp/v1/capabilities and /lmsp/v1/models.
import type { ServerResponse } from 'node:http';
import type { LmspDeps } from './deps';
import { capabilitiesDocument, toModelObject } from './format';
import { OBJECTS } from './lmspConstants';
import { lmspProblem } from './problems';
import { sendJson } from './wire';

export function getCapabilities(deps: LmspDeps, res: ServerResponse): void {
  sendJson(res, 200, capabilitiesDocument(deps.runtime.limits, deps.runtime.supportsResume, deps.maxBodyBytes));
}

export function listModels(deps: LmspDeps, res: ServerResponse): void {
  sendJson(res, 200, { object: OBJECTS.list, data: deps.runtime.listModels().map(toModelObject) });
}

export function getModel(deps: LmspDeps, res: ServerResponse, id: string): void {
  const model = deps.runtime.listModels().find((m) => m.id === id);
  if (!model) throw lmspProblem('model_not_found', 'No model with this id.', { param: 'model' });
  sendJson(res, 200, toModelObject(model));
}

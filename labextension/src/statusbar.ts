// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The status bar item of the focused tool terminal: which user its shell
 * runs as, in which tool instance (`user@instance`, as a prompt says it).
 */

import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { IStatusBar } from '@jupyterlab/statusbar';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type { ToolInstances } from './instances';
import type { IToolTerminalTracker } from './tokens';

/**
 * The id of the status bar item.
 */
export const WHERE_ITEM_ID = 'jupyter-tool-terminal:where';

/**
 * Show in the status bar where the focused tool terminal's shell runs.
 *
 * @param app - The application (its shell says which widget is current).
 * @param statusBar - JupyterLab's status bar.
 * @param tracker - The tool terminal panels.
 * @param instances - The instance model (tool type users).
 * @param trans - The translation bundle.
 */
export function addWhereItem(
  app: JupyterFrontEnd,
  statusBar: IStatusBar,
  tracker: IToolTerminalTracker,
  instances: ToolInstances,
  trans: TranslationBundle
): void {
  const item = new Widget();
  item.addClass('jp-ToolTerminal-where');
  item.addClass('jp-StatusBar-TextItem');
  const current = () => {
    const widget = app.shell.currentWidget;
    return widget !== null && tracker.has(widget)
      ? tracker.currentWidget
      : null;
  };
  // Shown only while a tool terminal is the current widget.
  const activeChanged = new Signal<Widget, void>(item);
  const update = () => {
    activeChanged.emit();
    const widget = current();
    if (widget === null) {
      item.node.textContent = '';
      item.node.title = '';
      return;
    }
    const id = widget.content.instanceId;
    const info = instances.get(id);
    const user = info?.user;
    item.node.textContent = user ? `${user}@${id}` : id;
    item.node.title = user
      ? trans.__(
          'The shell of this tool terminal runs as %1 in tool instance %2 (%3)',
          user,
          id,
          info?.display_name ?? id
        )
      : trans.__(
          "The shell of this tool terminal runs as the image's user in tool instance %1 (%2)",
          id,
          info?.display_name ?? id
        );
  };
  statusBar.registerStatusItem(WHERE_ITEM_ID, {
    item,
    align: 'left',
    rank: 5,
    isActive: () => current() !== null,
    activeStateChanged: activeChanged
  });
  app.shell.currentChanged?.connect(update);
  tracker.currentChanged.connect(update);
  instances.changed.connect(update);
  update();
}

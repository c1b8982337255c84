//! Column names for unaliased expressions, as SQL users expect them.
//!
//! Polars names `count(*)` `len` and `sum(steps)` after its column, so
//! `select sum(steps), avg(steps)` fails on two columns named `steps`.
//! DuckDB, SQLite and Postgres users write such queries without aliases;
//! before Polars sees a statement, every unaliased expression of every
//! SELECT that is more than a column is given its own text as its name
//! (`sum(steps)`, `count(*)`, `steps + 1`). Polars cannot sort by an
//! aggregate (`order by count(*) desc` fails on lengths), so an ORDER BY
//! expression that is one of the SELECT's is replaced by that one's name,
//! as SQL resolves it anyway.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, Ident, OrderByKind, Query, Select, SelectItem, SetExpr, VisitMut, VisitorMut,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserOptions};

/// `sql` with its unaliased expressions named; `None` when it does not
/// parse as one statement or has nothing to name (Polars then reads the
/// text as given, and reports a syntax error in its own words).
pub(super) fn named(sql: &str) -> Option<String> {
    // Polars' own parser settings (polars-sql's SQLContext::execute).
    let options = ParserOptions::new().with_trailing_commas(true);
    let mut statements = Parser::new(&GenericDialect)
        .with_options(options)
        .try_with_sql(sql)
        .ok()?
        .parse_statements()
        .ok()?;
    let [statement] = statements.as_mut_slice() else {
        return None;
    };
    let mut namer = Namer { named: 0 };
    let _ = statement.visit(&mut namer);
    (namer.named > 0).then(|| statement.to_string())
}

struct Namer {
    named: usize,
}

impl VisitorMut for Namer {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.name(&mut query.body);
        if let (SetExpr::Select(select), Some(order_by)) = (&*query.body, &mut query.order_by)
            && let OrderByKind::Expressions(items) = &mut order_by.kind
        {
            for item in items {
                if let Some(alias) = alias_of(select, &item.expr) {
                    item.expr = Expr::Identifier(alias);
                    self.named += 1;
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// The name of the SELECT's item that is `expr`, when `expr` is more
/// than a column.
fn alias_of(select: &Select, expr: &Expr) -> Option<Ident> {
    if is_column(expr) {
        return None;
    }
    select.projection.iter().find_map(|item| match item {
        SelectItem::ExprWithAlias { expr: e, alias } if e == expr => Some(alias.clone()),
        _ => None,
    })
}

impl Namer {
    fn name(&mut self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => {
                for item in &mut select.projection {
                    if let SelectItem::UnnamedExpr(expr) = item
                        && !is_column(expr)
                    {
                        let alias = Ident::with_quote('"', expr.to_string());
                        *item = SelectItem::ExprWithAlias {
                            expr: expr.clone(),
                            alias,
                        };
                        self.named += 1;
                    }
                }
            }
            // Both sides: the first names the columns, the second must
            // not then clash within itself.
            SetExpr::SetOperation { left, right, .. } => {
                self.name(left);
                self.name(right);
            }
            // A parenthesised query is visited as a query of its own.
            _ => {}
        }
    }
}

/// A column (`steps`, `t.steps`), which Polars names as SQL does, or
/// Polars' `COLUMNS('regex')`, which stands for several columns and keeps
/// their names.
fn is_column(expr: &Expr) -> bool {
    match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Function(function) => function.name.to_string().eq_ignore_ascii_case("columns"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::named;

    #[test]
    fn aggregates_and_expressions_are_named_by_their_text() {
        assert_eq!(
            named("select variant, count(*), sum(steps), steps + 1 from trials group by 1")
                .as_deref(),
            Some(
                "SELECT variant, count(*) AS \"count(*)\", sum(steps) AS \"sum(steps)\", \
                 steps + 1 AS \"steps + 1\" FROM trials GROUP BY 1"
            )
        );
    }

    #[test]
    fn columns_aliases_and_stars_are_left_alone() {
        assert_eq!(
            named("select steps, t.task, count(*) as n from trials t"),
            None
        );
        assert_eq!(named("select * from trials"), None);
        assert_eq!(named("select COLUMNS('^gen_ai_.*$') from trials"), None);
    }

    #[test]
    fn subqueries_ctes_and_unions_are_named_too() {
        let sql = named(
            "with c as (select max(steps) from trials) select min(steps) from trials \
             union all select avg(steps) from trials",
        )
        .unwrap_or_default();
        assert!(sql.contains("max(steps) AS \"max(steps)\""), "{sql}");
        assert!(sql.contains("min(steps) AS \"min(steps)\""), "{sql}");
        assert!(sql.contains("avg(steps) AS \"avg(steps)\""), "{sql}");
    }

    #[test]
    fn an_order_by_on_a_selected_expression_sorts_by_its_name() {
        assert_eq!(
            named(
                "select task, count(*), avg(cost_usd) * 100 as c from trials group by task \
                   order by count(*) desc, avg(cost_usd) * 100, task, sum(steps)"
            )
            .as_deref(),
            Some(
                "SELECT task, count(*) AS \"count(*)\", avg(cost_usd) * 100 AS c FROM trials \
                 GROUP BY task ORDER BY \"count(*)\" DESC, c, task, sum(steps)"
            )
        );
    }

    #[test]
    fn a_quote_in_the_text_is_escaped_in_the_name() {
        let sql = named("select upper('a\"b') from trials").unwrap_or_default();
        assert!(sql.contains(r#"AS "upper('a""b')""#), "{sql}");
    }

    #[test]
    fn what_does_not_parse_is_left_to_polars() {
        assert_eq!(named("select count( from trials"), None);
        assert_eq!(named("select 1; select 2"), None);
    }
}
